package header

import (
	"strconv"
	"unicode/utf8"
)

// ErrorKind classifies a rejection. The kinds that the reference reader
// (safetensors' SafeTensors::read_metadata and its slicer) can return carry the
// names of its SafeTensorError variants, so a result here can be compared with
// the reference one for one; the others are hubproxy's own and say so.
//
// ErrorKind implements error, so a caller can write
// errors.Is(err, header.InvalidOffset) without unwrapping a *FormatError.
type ErrorKind int

// The error kinds, in the order the reference checks a file (docs/safetensors.md §2),
// followed by the slicing and index kinds.
const (
	// HeaderTooSmall: the file is shorter than the 8-byte length prefix.
	HeaderTooSmall ErrorKind = iota + 1
	// HeaderTooLarge: the prefix claims more than 100,000,000 header bytes
	// (MaxHeaderSize, the reference's cap).
	HeaderTooLarge
	// HeaderLimitExceeded (hubproxy's own): the header is within the
	// reference's cap but above the operational Options.MaxHeaderSize, or
	// lists more than Options.MaxTensors tensors.
	HeaderLimitExceeded
	// InvalidHeaderLength: 8 + N is beyond the end of the file.
	InvalidHeaderLength
	// InvalidHeader: the header bytes are not valid UTF-8.
	InvalidHeader
	// InvalidHeaderDeserialization: the header is not the JSON the reference
	// accepts (syntax, types, missing or duplicate fields, nesting, ...).
	InvalidHeaderDeserialization
	// DuplicateTensor (hubproxy's own deviation): the same tensor name appears
	// twice. The reference keeps the last one; we refuse the file.
	DuplicateTensor
	// InvalidOffset: a tensor does not start where the previous one ended
	// (a gap, an overlap, or end < begin).
	InvalidOffset
	// ValidationOverflow: shape × dtype size overflows 64 bits.
	ValidationOverflow
	// MisalignedSlice: a sub-byte tensor or slice does not end on a byte.
	MisalignedSlice
	// TensorInvalidInfo: data_offsets disagree with dtype × shape.
	TensorInvalidInfo
	// MetadataIncompleteBuffer: the tensors do not cover the data buffer
	// exactly, or the file size is unknown.
	MetadataIncompleteBuffer
	// TooManySlices: a slice names more dimensions than the tensor has.
	TooManySlices
	// SliceOutOfRange: a slice bound is beyond its dimension.
	SliceOutOfRange
	// InvalidSlice (hubproxy's own): a malformed slice, or start > stop.
	InvalidSlice
	// InvalidShard (hubproxy's own): a bad dim, rank or world for Shard.
	InvalidShard
	// TooManyRanges (hubproxy's own): a slice would need more than MaxRanges
	// separate byte ranges.
	TooManyRanges
	// InvalidIndex (hubproxy's own): a *.safetensors.index.json is malformed
	// or names a shard that is not a plain relative path.
	InvalidIndex
)

var kindNames = [...]string{
	HeaderTooSmall:               "HeaderTooSmall",
	HeaderTooLarge:               "HeaderTooLarge",
	HeaderLimitExceeded:          "HeaderLimitExceeded",
	InvalidHeaderLength:          "InvalidHeaderLength",
	InvalidHeader:                "InvalidHeader",
	InvalidHeaderDeserialization: "InvalidHeaderDeserialization",
	DuplicateTensor:              "DuplicateTensor",
	InvalidOffset:                "InvalidOffset",
	ValidationOverflow:           "ValidationOverflow",
	MisalignedSlice:              "MisalignedSlice",
	TensorInvalidInfo:            "TensorInvalidInfo",
	MetadataIncompleteBuffer:     "MetadataIncompleteBuffer",
	TooManySlices:                "TooManySlices",
	SliceOutOfRange:              "SliceOutOfRange",
	InvalidSlice:                 "InvalidSlice",
	InvalidShard:                 "InvalidShard",
	TooManyRanges:                "TooManyRanges",
	InvalidIndex:                 "InvalidIndex",
}

// kindMessages paraphrase the reference's Display strings where it has one.
var kindMessages = [...]string{
	HeaderTooSmall:               "header too small",
	HeaderTooLarge:               "header too large",
	HeaderLimitExceeded:          "header larger than this proxy allows",
	InvalidHeaderLength:          "invalid header length",
	InvalidHeader:                "invalid UTF-8 in header",
	InvalidHeaderDeserialization: "invalid JSON in header",
	DuplicateTensor:              "duplicate tensor name",
	InvalidOffset:                "invalid offset",
	ValidationOverflow:           "overflow computing buffer size from shape and/or element type",
	MisalignedSlice:              "sub-byte dtype slice does not end on a byte boundary",
	TensorInvalidInfo:            "invalid shape, data type, or offset",
	MetadataIncompleteBuffer:     "incomplete metadata, file not fully covered",
	TooManySlices:                "more slices than tensor dimensions",
	SliceOutOfRange:              "slice out of range",
	InvalidSlice:                 "invalid slice",
	InvalidShard:                 "invalid shard",
	TooManyRanges:                "slice needs too many byte ranges",
	InvalidIndex:                 "invalid safetensors index",
}

// String is the kind's name, e.g. "InvalidOffset".
func (k ErrorKind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "ErrorKind(" + strconv.Itoa(int(k)) + ")"
}

// Error is the kind's generic message, so a kind can be an errors.Is target.
// (fmt's %v prints this; use String for the name.)
func (k ErrorKind) Error() string { return "safetensors: " + k.message() }

func (k ErrorKind) message() string {
	if k > 0 && int(k) < len(kindMessages) {
		return kindMessages[k]
	}
	return k.String()
}

// FormatError reports input that the parser, slicer or index reader refused.
// Its message is safe to show to clients: untrusted strings in it are quoted
// and truncated, and it names no internal state.
type FormatError struct {
	Kind   ErrorKind
	Tensor string // the tensor concerned, "" if none
	Reason string // detail for humans; never matched on
}

// Error renders "safetensors: [tensor "name": ]<kind message>[: reason]",
// the tensor name quoted and truncated.
func (e *FormatError) Error() string {
	s := "safetensors: "
	if e.Tensor != "" {
		s += "tensor " + quote(e.Tensor) + ": "
	}
	s += e.Kind.message()
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is makes errors.Is(err, kind) true for a *FormatError of that kind.
func (e *FormatError) Is(target error) bool {
	k, ok := target.(ErrorKind)
	return ok && k == e.Kind
}

// maxQuoted bounds how much of an untrusted string goes into a message.
const maxQuoted = 96

// quote renders an untrusted string for an error message: Go-quoted (so
// control characters and NUL are escaped) and cut to maxQuoted bytes on a rune
// boundary.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

func formatErr(k ErrorKind, tensor, reason string) *FormatError {
	return &FormatError{Kind: k, Tensor: tensor, Reason: reason}
}
