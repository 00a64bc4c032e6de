package header

import (
	"fmt"
	"math"
	"math/bits"
)

// slice.go turns a per-dimension range into the byte ranges of a tensor that
// hold it, so the tensor API can serve a slice (or one tensor-parallel rank's
// shard) with HTTP range requests instead of the whole tensor.
//
// The layout is row-major with no strides. Let j be the innermost dimension
// whose range is not the whole dimension. Each combination of indices in the
// dimensions before j contributes one chunk, [a_j, b_j) × (the size of one
// step along j), and chunks for consecutive combinations are never adjacent
// (that would need j to be whole). So the slice is one range exactly when
// every dimension before j selects a single index: the reference's
// contiguity rule (docs/safetensors.md §5).
//
// Unlike the reference slicer this one refuses start > stop (the reference
// panics), allows empty ranges anywhere including on zero-size dimensions
// and at start == size (the reference refuses them), and returns no bytes for
// an empty result (the reference can return the whole tensor for [0:0, 0:2]).

// End, as Dim.Stop, means "to the end of the dimension".
const End = math.MaxUint64

// MaxRanges bounds how many byte ranges one Slice or Shard may produce; a
// finer slice is TooManyRanges. It covers a column shard of a 1M-row matrix,
// and bounds the result to 16 MiB.
const MaxRanges = 1 << 20

// Dim selects elements [Start, Stop) of one dimension (step 1). Stop may be
// End. A single index i is Dim{i, i+1}: the dimension is kept, with size 1.
type Dim struct{ Start, Stop uint64 }

// ByteRange is Len bytes at Off, relative to the tensor's first byte.
type ByteRange struct{ Off, Len uint64 }

// Slice returns the byte ranges of t that hold the slice dims, in row-major
// order, coalesced and never empty, and the slice's shape. dims may be shorter
// than the shape: the remaining dimensions are taken whole. An empty slice
// yields no ranges. For sub-byte dtypes every range must start and end on a
// byte (MisalignedSlice otherwise).
func (t Tensor) Slice(dims []Dim) (ranges []ByteRange, shape []uint64, err error) {
	width, err := t.check()
	if err != nil {
		return nil, nil, err
	}
	if len(dims) > len(t.Shape) {
		return nil, nil, formatErr(TooManySlices, t.Name, fmt.Sprintf(
			"%d slices for a tensor of rank %d", len(dims), len(t.Shape)))
	}
	rank := len(t.Shape)
	lo := make([]uint64, rank)
	shape = make([]uint64, rank)
	empty := false
	for i, d := range t.Shape {
		a, b := uint64(0), d
		if i < len(dims) {
			a, b = dims[i].Start, dims[i].Stop
			if b == End {
				b = d
			}
		}
		if b > d {
			return nil, nil, formatErr(SliceOutOfRange, t.Name, fmt.Sprintf(
				"dimension %d: stop %d is beyond its size %d", i, b, d))
		}
		if a > b {
			return nil, nil, formatErr(InvalidSlice, t.Name, fmt.Sprintf(
				"dimension %d: start %d is after stop %d", i, a, b))
		}
		lo[i], shape[i] = a, b-a
		empty = empty || a == b
	}
	if empty {
		return nil, shape, nil
	}
	// No dimension is empty, so the whole tensor's bit count (which check
	// proved fits in 64 bits) bounds every stride and offset below.
	stride := make([]uint64, rank) // bits per step along each dimension
	s := uint64(width)
	j := -1 // innermost partial dimension
	for i := rank - 1; i >= 0; i-- {
		stride[i] = s
		s *= t.Shape[i]
		if j < 0 && shape[i] != t.Shape[i] {
			j = i
		}
	}
	if j < 0 {
		return []ByteRange{{0, t.Len()}}, shape, nil
	}
	count := uint64(1)
	for i := 0; i < j; i++ {
		hi, c := bits.Mul64(count, shape[i])
		if hi != 0 || c > MaxRanges {
			return nil, nil, formatErr(TooManyRanges, t.Name, fmt.Sprintf(
				"the slice needs more than %d separate byte ranges", MaxRanges))
		}
		count = c
	}
	off := uint64(0)
	for i := 0; i <= j; i++ {
		off += lo[i] * stride[i]
	}
	chunk := shape[j] * stride[j]
	if chunk%8 != 0 {
		return nil, nil, misaligned(t, j)
	}
	ranges = make([]ByteRange, 0, count)
	idx := make([]uint64, j)
	for k := uint64(0); k < count; k++ {
		if off%8 != 0 {
			return nil, nil, misaligned(t, j)
		}
		r := ByteRange{off / 8, chunk / 8}
		if n := len(ranges); n > 0 && ranges[n-1].Off+ranges[n-1].Len == r.Off {
			ranges[n-1].Len += r.Len
		} else {
			ranges = append(ranges, r)
		}
		// Advance the odometer over dimensions 0..j-1, innermost first.
		for i := j - 1; i >= 0; i-- {
			idx[i]++
			off += stride[i]
			if idx[i] < shape[i] {
				break
			}
			off -= shape[i] * stride[i]
			idx[i] = 0
		}
	}
	return ranges, shape, nil
}

func misaligned(t Tensor, dim int) error {
	return formatErr(MisalignedSlice, t.Name, fmt.Sprintf(
		"slicing dimension %d of a %s tensor does not fall on byte boundaries", dim, t.DType))
}

// Shard returns the byte ranges and shape of rank's part when dimension dim is
// split over world ranks for tensor parallelism: elements
// [size×rank/world, size×(rank+1)/world) of that dimension, the rest whole.
// Uneven splits give the later ranks the extra elements (10 over 3: 3, 3, 4);
// a rank may get nothing when world exceeds the size.
func (t Tensor) Shard(dim, rank, world int) (ranges []ByteRange, shape []uint64, err error) {
	switch {
	case world < 1:
		return nil, nil, formatErr(InvalidShard, t.Name, fmt.Sprintf("world size %d is not positive", world))
	case rank < 0 || rank >= world:
		return nil, nil, formatErr(InvalidShard, t.Name, fmt.Sprintf("rank %d is outside [0, %d)", rank, world))
	case dim < 0 || dim >= len(t.Shape):
		return nil, nil, formatErr(InvalidShard, t.Name, fmt.Sprintf(
			"dimension %d does not exist in a tensor of rank %d", dim, len(t.Shape)))
	}
	dims := make([]Dim, dim+1)
	for i := range dim {
		dims[i] = Dim{0, End}
	}
	size, w := t.Shape[dim], uint64(world)
	dims[dim] = Dim{split(size, uint64(rank), w), split(size, uint64(rank)+1, w)}
	return t.Slice(dims)
}

// split is size×k/world without overflow: the 128-bit product's high word is
// below world for k ≤ world, so Div64 cannot panic.
func split(size, k, world uint64) uint64 {
	hi, lo := bits.Mul64(size, k)
	q, _ := bits.Div64(hi, lo, world)
	return q
}

// check verifies that t is self-consistent (a known dtype, a whole number of
// bytes that fits in 64 bits, equal to End-Begin), as every tensor from Parse
// is; a hand-built Tensor could otherwise make the range math overflow.
func (t Tensor) check() (width int, err error) {
	width, ok := t.DType.Bits()
	if !ok {
		return 0, formatErr(TensorInvalidInfo, t.Name, "unknown dtype")
	}
	n, err := byteSize(&t)
	if err != nil {
		return 0, err
	}
	if t.End < t.Begin || n != t.End-t.Begin {
		return 0, formatErr(TensorInvalidInfo, t.Name, "data_offsets disagree with dtype and shape")
	}
	return width, nil
}
