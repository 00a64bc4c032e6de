package header

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/big"
	"sort"
	"strconv"
	"testing"
)

// FuzzParse feeds arbitrary files to Parse. Any error must be a *FormatError;
// any accepted header must satisfy every invariant the tensor API relies on,
// and slicing or sharding its tensors must stay within them.
func FuzzParse(f *testing.F) {
	for _, v := range append(vectors(), vector61()...) {
		f.Add(v.file)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := parseBytes(data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Kind < HeaderTooSmall || fe.Kind > MetadataIncompleteBuffer {
				t.Fatalf("error %v (%T) is not a parse FormatError", err, err)
			}
			return
		}
		checkInvariants(t, h, uint64(len(data)))
		// A second parse of the same bytes gives the same result.
		h2, err := Parse(bytes.NewReader(data), int64(len(data)), Options{})
		if err != nil || len(h2.Tensors) != len(h.Tensors) {
			t.Fatalf("reparse differs: %v", err)
		}
	})
}

// FuzzParseText fuzzes the header text alone: the harness wraps it in a
// file whose prefix is right and whose data buffer is exactly as long as the
// largest data_offsets end (when that is small), so mutations reach the
// offset and size checks instead of dying on MetadataIncompleteBuffer.
func FuzzParseText(f *testing.F) {
	for _, v := range append(vectors(), vector61()...) {
		if len(v.file) >= 8 {
			n := binary.LittleEndian.Uint64(v.file)
			if n <= uint64(len(v.file)-8) {
				f.Add(v.file[8 : 8+n])
			}
		}
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		var d uint64
		if dec, err := decodeHeader(text, 8, 0); err == nil {
			for _, tn := range dec.tensors {
				d = max(d, tn.End)
			}
		}
		if d > 1<<16 {
			return
		}
		data := file(string(text), int(d))
		h, err := parseBytes(data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a FormatError", err, err)
			}
			return
		}
		checkInvariants(t, h, uint64(len(data)))
	})
}

// checkInvariants asserts what an accepted header guarantees: tensors sorted,
// disjoint, contiguous from 0 and covering exactly the data buffer; each
// tensor's length is bits(dtype) × prod(shape) / 8 (computed independently,
// with big integers); names unique and found by Lookup; and every slice or
// shard of a tensor stays within [0, Len).
func checkInvariants(t *testing.T, h *Header, size uint64) {
	t.Helper()
	if h.DataStart != 8+h.HeaderLen || h.FileSize != size || h.DataStart > size {
		t.Fatalf("N=%d DataStart=%d FileSize=%d, file is %d bytes", h.HeaderLen, h.DataStart, h.FileSize, size)
	}
	names := map[string]bool{}
	var cursor uint64
	for i, tn := range h.Tensors {
		if i > 0 {
			p := h.Tensors[i-1]
			if p.Begin > tn.Begin || (p.Begin == tn.Begin && (p.End > tn.End || (p.End == tn.End && p.Name >= tn.Name))) {
				t.Fatalf("tensors %q and %q out of order", p.Name, tn.Name)
			}
		}
		if tn.Begin != cursor || tn.End < tn.Begin {
			t.Fatalf("tensor %q at [%d,%d), cursor %d", tn.Name, tn.Begin, tn.End, cursor)
		}
		cursor = tn.End
		w, ok := tn.DType.Bits()
		if !ok {
			t.Fatalf("tensor %q has unknown dtype %q", tn.Name, tn.DType)
		}
		want := big.NewInt(int64(w))
		for _, d := range tn.Shape {
			want.Mul(want, new(big.Int).SetUint64(d))
		}
		if want.Bit(0) != 0 || want.Bit(1) != 0 || want.Bit(2) != 0 {
			t.Fatalf("tensor %q: %v bits is not whole bytes", tn.Name, want)
		}
		want.Rsh(want, 3)
		if !want.IsUint64() || want.Uint64() != tn.Len() {
			t.Fatalf("tensor %q: Len %d, dtype × shape gives %v", tn.Name, tn.Len(), want)
		}
		if names[tn.Name] {
			t.Fatalf("tensor %q listed twice", tn.Name)
		}
		names[tn.Name] = true
		if got, ok := h.Lookup(tn.Name); !ok || got.Begin != tn.Begin || got.End != tn.End {
			t.Fatalf("Lookup(%q) = %+v, %v", tn.Name, got, ok)
		}
		if off, n := h.FileRange(tn); off != h.DataStart+tn.Begin || off+n > size {
			t.Fatalf("FileRange(%q) = %d+%d beyond %d", tn.Name, off, n, size)
		}
		if i < 16 {
			checkSlicing(t, tn)
		}
	}
	if cursor != size-h.DataStart {
		t.Fatalf("tensors end at %d, data buffer is %d bytes", cursor, size-h.DataStart)
	}
}

// checkSlicing shards every dimension of tn over 1 to 3 ranks and checks the
// ranges: inside [0, Len), increasing, disjoint, never adjacent, summing to
// the shard's size; the ranks together cover the whole tensor.
func checkSlicing(t *testing.T, tn Tensor) {
	t.Helper()
	w, _ := tn.DType.Bits()
	whole, shape, err := tn.Slice(nil)
	if err != nil {
		t.Fatalf("Slice(%q, nil): %v", tn.Name, err)
	}
	checkRanges(t, tn, whole, shape, w)
	for dim := range tn.Shape {
		for world := 1; world <= 3; world++ {
			var total uint64
			for rank := 0; rank < world; rank++ {
				rs, shape, err := tn.Shard(dim, rank, world)
				if errors.Is(err, MisalignedSlice) || errors.Is(err, TooManyRanges) {
					total = tn.Len() // nothing to add up
					break
				}
				if err != nil {
					t.Fatalf("Shard(%q, %d, %d, %d): %v", tn.Name, dim, rank, world, err)
				}
				total += checkRanges(t, tn, rs, shape, w)
			}
			if total != tn.Len() {
				t.Fatalf("shards of %q over dim %d, world %d cover %d of %d bytes", tn.Name, dim, world, total, tn.Len())
			}
		}
	}
}

// checkRanges validates one slice result and returns its byte count.
func checkRanges(t *testing.T, tn Tensor, rs []ByteRange, shape []uint64, width int) uint64 {
	t.Helper()
	want := big.NewInt(int64(width))
	for _, d := range shape {
		want.Mul(want, new(big.Int).SetUint64(d))
	}
	want.Rsh(want, 3)
	var sum, next uint64
	for i, r := range rs {
		if r.Len == 0 || r.Off+r.Len < r.Off || r.Off+r.Len > tn.Len() {
			t.Fatalf("%q: range %+v outside [0,%d)", tn.Name, r, tn.Len())
		}
		if i > 0 && r.Off <= next {
			t.Fatalf("%q: range %+v overlaps or touches the previous one ending at %d", tn.Name, r, next)
		}
		next = r.Off + r.Len
		sum += r.Len
	}
	if !want.IsUint64() || want.Uint64() != sum {
		t.Fatalf("%q: ranges hold %d bytes, shape %v needs %v", tn.Name, sum, shape, want)
	}
	return sum
}

// FuzzSlice compares Tensor.Slice with a brute-force oracle that walks every
// element of a small tensor in row-major order.
func FuzzSlice(f *testing.F) {
	f.Add(uint8(17), []byte{2, 3}, []byte{0, 2, 1, 3})   // F32 [2,3] [:, 1:3]
	f.Add(uint8(1), []byte{2, 4}, []byte{0, 2, 1, 2})    // F4 [2,4] [:, 1:2]
	f.Add(uint8(2), []byte{8}, []byte{4, 8})             // F6 [8] [4:8]
	f.Add(uint8(4), []byte{4, 0, 3}, []byte{0, 0, 1, 1}) // U8 with a zero dim
	f.Add(uint8(4), []byte{}, []byte{})                  // scalar
	f.Fuzz(func(t *testing.T, dt uint8, shapeB, dimsB []byte) {
		dtypes := DTypes()
		tn := Tensor{Name: "x", DType: dtypes[int(dt)%len(dtypes)]}
		if len(shapeB) > 4 {
			shapeB = shapeB[:4]
		}
		elems := uint64(1)
		for _, b := range shapeB {
			tn.Shape = append(tn.Shape, uint64(b%7))
			elems *= uint64(b % 7)
		}
		w, _ := tn.DType.Bits()
		if elems*uint64(w)%8 != 0 {
			return // not a valid tensor; Parse would have refused it
		}
		tn.End = elems * uint64(w) / 8
		var dims []Dim
		for i := 0; i+1 < len(dimsB) && len(dims) <= len(tn.Shape); i += 2 {
			d := Dim{uint64(dimsB[i] % 9), uint64(dimsB[i+1] % 9)}
			if dimsB[i+1] == 255 {
				d.Stop = End
			}
			dims = append(dims, d)
		}
		got, shape, err := tn.Slice(dims)
		want, wantShape, wantErr := oracleSlice(tn, dims)
		if wantErr != 0 {
			if !errors.Is(err, wantErr) {
				t.Fatalf("%v %v %+v: err %v, want %v", tn.DType, tn.Shape, dims, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("%v %v %+v: %v", tn.DType, tn.Shape, dims, err)
		}
		if !equalRanges(got, want) || !equalU64(shape, wantShape) {
			t.Fatalf("%v %v %+v: got %v %v, want %v %v", tn.DType, tn.Shape, dims, got, shape, want, wantShape)
		}
	})
}

// oracleSlice marks the bits of every selected element, merges them into
// intervals and converts those to bytes.
func oracleSlice(tn Tensor, dims []Dim) ([]ByteRange, []uint64, ErrorKind) {
	if len(dims) > len(tn.Shape) {
		return nil, nil, TooManySlices
	}
	rank := len(tn.Shape)
	lo, hi := make([]uint64, rank), make([]uint64, rank)
	shape := make([]uint64, rank)
	total := uint64(1)
	for i, d := range tn.Shape {
		lo[i], hi[i] = 0, d
		if i < len(dims) {
			lo[i], hi[i] = dims[i].Start, dims[i].Stop
			if hi[i] == End {
				hi[i] = d
			}
		}
		if hi[i] > d {
			return nil, nil, SliceOutOfRange
		}
		if lo[i] > hi[i] {
			return nil, nil, InvalidSlice
		}
		shape[i] = hi[i] - lo[i]
		total *= d
	}
	w, _ := tn.DType.Bits()
	var bitsRanges [][2]uint64
	idx := make([]uint64, rank)
	for e := uint64(0); e < total; e++ {
		// idx is the multi-index of element e.
		rem := e
		for i := rank - 1; i >= 0; i-- {
			idx[i] = rem % tn.Shape[i]
			rem /= tn.Shape[i]
		}
		in := true
		for i := range idx {
			in = in && idx[i] >= lo[i] && idx[i] < hi[i]
		}
		if !in {
			continue
		}
		b := e * uint64(w)
		if n := len(bitsRanges); n > 0 && bitsRanges[n-1][1] == b {
			bitsRanges[n-1][1] += uint64(w)
		} else {
			bitsRanges = append(bitsRanges, [2]uint64{b, b + uint64(w)})
		}
	}
	var out []ByteRange
	for _, r := range bitsRanges {
		if r[0]%8 != 0 || r[1]%8 != 0 {
			return nil, nil, MisalignedSlice
		}
		out = append(out, ByteRange{r[0] / 8, (r[1] - r[0]) / 8})
	}
	return out, shape, 0
}

func equalRanges(a, b []ByteRange) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzLayout builds well-formed headers from structured input (4 bytes per
// tensor: dtype, rank, dimension seed, offset perturbation) so that most
// inputs reach the offset, size and coverage checks, and compares Parse's
// verdict with an independent model of docs/safetensors.md §2 steps 6 to 8 that
// uses big integers.
func FuzzLayout(f *testing.F) {
	f.Add([]byte{17, 2, 0x23, 0}, int8(0))
	f.Add([]byte{1, 1, 3, 0, 2, 1, 4, 0, 4, 0, 0, 0}, int8(0))
	f.Add([]byte{4, 1, 4, 0, 4, 1, 4, 5}, int8(1))
	f.Add([]byte{4, 3, 0xff, 0, 5, 2, 0x10, 9, 9, 1, 2, 3}, int8(-1))
	f.Fuzz(func(t *testing.T, spec []byte, tail int8) {
		data, model, d := layoutFile(spec, tail)
		wantKind, wantTensor := modelVerdict(model, d)
		h, err := parseBytes(data)
		checkErr(t, err, wantKind, wantTensor)
		if err == nil {
			checkInvariants(t, h, uint64(len(data)))
		}
	})
}

// layoutFile turns FuzzLayout's input into a file, the tensors it declares,
// and its data length.
func layoutFile(spec []byte, tail int8) ([]byte, []Tensor, uint64) {
	dtypes := DTypes()
	var entries []string
	var model []Tensor
	var cursor uint64
	for i := 0; i+3 < len(spec) && i < 64; i += 4 {
		dt := dtypes[int(spec[i])%len(dtypes)]
		rank := int(spec[i+1] % 4)
		shape := []uint64{}
		seed := spec[i+2]
		for k := 0; k < rank; k++ {
			shape = append(shape, uint64(seed>>(2*k))%4+uint64(spec[i+1]/4%3))
		}
		w, _ := dt.Bits()
		nbits := uint64(w)
		for _, d := range shape {
			nbits *= d
		}
		begin, end := cursor, cursor+nbits/8
		switch p := spec[i+3]; p % 8 {
		case 5: // wrong length
			end += uint64(p / 8 % 3)
		case 6: // gap
			begin += uint64(p/8%3) + 1
			end = begin + nbits/8
		case 7: // reversed
			begin, end = end, begin
		}
		name := "t" + strconv.Itoa(int(spec[i+3]/8%4)) + "_" + strconv.Itoa(i/4%3)
		entries = append(entries, tj(name, dt, shape, begin, end))
		model = append(model, Tensor{Name: name, DType: dt, Shape: shape, Begin: begin, End: end})
		cursor = max(cursor, end)
	}
	d := max(int64(cursor)+int64(tail%3), 0)
	return file(obj(entries...), int(d)), model, uint64(d)
}

// modelVerdict is steps 6 to 8 (plus the duplicate-name deviation) written
// independently of header.go, with big.Int arithmetic.
func modelVerdict(ts []Tensor, dataLen uint64) (ErrorKind, string) {
	seen := map[string]bool{}
	for _, tn := range ts {
		if seen[tn.Name] {
			return DuplicateTensor, tn.Name
		}
		seen[tn.Name] = true
	}
	sorted := append([]Tensor(nil), ts...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		return a.Begin < b.Begin || a.Begin == b.Begin && (a.End < b.End || a.End == b.End && a.Name < b.Name)
	})
	limit := new(big.Int).Lsh(big.NewInt(1), 64)
	var cursor uint64
	for _, tn := range sorted {
		if tn.Begin != cursor || tn.End < tn.Begin {
			return InvalidOffset, tn.Name
		}
		n := big.NewInt(1)
		for _, d := range tn.Shape {
			n.Mul(n, new(big.Int).SetUint64(d))
			if n.Cmp(limit) >= 0 {
				return ValidationOverflow, tn.Name
			}
		}
		w, _ := tn.DType.Bits()
		n.Mul(n, big.NewInt(int64(w)))
		if n.Cmp(limit) >= 0 {
			return ValidationOverflow, tn.Name
		}
		if n.Uint64()%8 != 0 {
			return MisalignedSlice, tn.Name
		}
		if n.Uint64()/8 != tn.End-tn.Begin {
			return TensorInvalidInfo, tn.Name
		}
		cursor = tn.End
	}
	if cursor != dataLen {
		return MetadataIncompleteBuffer, ""
	}
	return 0, ""
}
