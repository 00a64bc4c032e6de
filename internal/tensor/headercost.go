package tensor

import (
	"math/bits"
	"unsafe"

	"github.com/hubproxy/hubproxy/internal/header"
)

// headerCost estimates the heap bytes a parsed header keeps alive, so the
// header cache can be bounded by memory rather than by count: a header's JSON
// length says little, since a header of 200,000 small tensors costs several
// times its text once parsed.
//
// It counts what header.Parse leaves behind: the Header itself, the Tensors
// array (by capacity), each tensor's own name, dtype and shape allocations,
// the name index that Lookup uses (one map entry per tensor; Parse always
// builds it), and the metadata map with its strings. Parse copies every
// string out of the header text, so the text itself is not retained.
func headerCost(h *header.Header) int64 {
	n := int64(unsafe.Sizeof(*h))
	n += int64(cap(h.Tensors)) * int64(unsafe.Sizeof(header.Tensor{}))
	for i := range h.Tensors {
		t := &h.Tensors[i]
		n += allocSize(len(t.Name)) + allocSize(len(t.DType)) + allocSize(cap(t.Shape)*8)
	}
	// The name index: map[string]int, whose keys share the names' bytes.
	n += mapCost(len(h.Tensors), int(unsafe.Sizeof(""))+int(unsafe.Sizeof(0)))
	n += mapCost(len(h.Metadata), 2*int(unsafe.Sizeof("")))
	for k, v := range h.Metadata {
		n += allocSize(len(k)) + allocSize(len(v))
	}
	return n
}

// allocSize approximates the heap block the Go allocator hands out for an
// n-byte allocation without pointers. Its size classes waste at most about
// an eighth of a block, so rounding up to an eighth of the next power of two
// (and to 8 bytes for the tiny objects packed into shared 16-byte blocks)
// tracks it closely for the small strings and slices headers are made of.
func allocSize(n int) int64 {
	switch {
	case n <= 0:
		return 0
	case n <= 16:
		return int64(n+7) &^ 7
	}
	step := int64(1) << (bits.Len(uint(n-1)) - 3) // an eighth of the next power of two
	step = max(step, 16)
	return (int64(n) + step - 1) / step * step
}

// mapCost approximates the memory of a Go map holding n entries of slot bytes
// (key plus value) each. Go's maps store entries in groups of eight slots with
// one control byte per slot, keep at most 7/8 of the slots in use, and size
// their tables in powers of two.
func mapCost(n, slot int) int64 {
	if n == 0 {
		return 0
	}
	slots := max(8, n*8/7+1)
	slots = 1 << bits.Len(uint(slots-1))
	return int64(slots) * int64(slot+1)
}
