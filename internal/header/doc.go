// Package header parses and validates safetensors headers exactly as the
// reference reader (huggingface/safetensors, SafeTensors::read_metadata) does,
// reads sharded checkpoint indexes, and turns tensor slices and
// tensor-parallel shards into byte ranges.
//
// It is pure: no HTTP, no disk, no other hubproxy package. Everything it
// reads comes from upstreams hubproxy does not trust, so every length is
// capped before it is allocated, all arithmetic is overflow-checked, and no
// input makes it panic.
//
// A safetensors file is
//
//	[0, 8)        N, little-endian u64
//	[8, 8+N)      UTF-8 JSON header, optionally padded with JSON whitespace
//	[8+N, EOF)    data buffer; data_offsets are relative to its start
//
// Parse applies the reference's checks in the reference's order, so the
// first failure decides the ErrorKind (named after the reference's
// SafeTensorError variants). Deliberate deviations, all stricter:
//   - a repeated tensor name is DuplicateTensor (the reference keeps the last);
//   - an operational header cap below the reference's is HeaderLimitExceeded,
//     and so is an operational cap on the number of tensors (the reference
//     has none), checked as entries are decoded, so a JSON error after the
//     entry past the cap goes unreported;
//   - offset sums are checked, not wrapped (same result: MetadataIncompleteBuffer).
//
// The serde quirks the reference accepts (a tensor as a 3-element array, a
// dtype as {"F32": null}) are accepted too, for parity. docs/safetensors.md
// states the rules this package follows, in order, with their test vectors.
package header
