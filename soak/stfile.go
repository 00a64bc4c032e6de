package soak

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// The oracle reads safetensors itself, from the format's definition, rather
// than through hubproxy's internal/header: a bug there must not be able to
// agree with itself.

// stTensor is one tensor of a safetensors file; Begin and End are offsets
// in the data section, as data_offsets gives them.
type stTensor struct {
	Name       string
	DType      string
	Shape      []int64
	Begin, End int64
}

// stFile is a parsed safetensors file.
type stFile struct {
	DataStart int64 // 8 + the header's length
	Meta      map[string]string
	Tensors   []stTensor // in data order
}

// maxHeader bounds the header this parser accepts; the soak's are tiny.
const maxHeader = 16 << 20

// parseSafetensors parses b, which must hold at least the header; with
// whole set it must be the entire file and every tensor's bytes must lie in
// it.
func parseSafetensors(b []byte, whole bool) (stFile, error) {
	if len(b) < 8 {
		return stFile{}, fmt.Errorf("safetensors: %d bytes, shorter than the length prefix", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader || 8+int64(n) > int64(len(b)) {
		return stFile{}, fmt.Errorf("safetensors: header length %d does not fit in %d bytes", n, len(b))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		return stFile{}, fmt.Errorf("safetensors: header: %w", err)
	}
	f := stFile{DataStart: 8 + int64(n)}
	for name, v := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &f.Meta); err != nil {
				return stFile{}, fmt.Errorf("safetensors: __metadata__: %w", err)
			}
			continue
		}
		var t struct {
			DType   string  `json:"dtype"`
			Shape   []int64 `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &t); err != nil || len(t.Offsets) != 2 {
			return stFile{}, fmt.Errorf("safetensors: tensor %q: bad entry", name)
		}
		size, err := hubtest.TensorBytes(t.DType, t.Shape)
		if err != nil || t.Offsets[0] < 0 || t.Offsets[1]-t.Offsets[0] != size {
			return stFile{}, fmt.Errorf("safetensors: tensor %q: offsets %v for %s%v", name, t.Offsets, t.DType, t.Shape)
		}
		if whole && f.DataStart+t.Offsets[1] > int64(len(b)) {
			return stFile{}, fmt.Errorf("safetensors: tensor %q ends past the file", name)
		}
		f.Tensors = append(f.Tensors, stTensor{Name: name, DType: t.DType, Shape: t.Shape, Begin: t.Offsets[0], End: t.Offsets[1]})
	}
	sort.Slice(f.Tensors, func(i, j int) bool { return f.Tensors[i].Begin < f.Tensors[j].Begin })
	return f, nil
}

// bytesOf returns t's bytes from a whole file b.
func (f stFile) bytesOf(b []byte, t stTensor) []byte {
	return b[f.DataStart+t.Begin : f.DataStart+t.End]
}

// shardOf is rank's part of a row-major tensor split along dim over world
// ranks, as the tensor API defines it: elements [size*rank/world,
// size*(rank+1)/world) of that dimension. It returns the bytes and the shape.
func shardOf(data []byte, dtype string, shape []int64, dim, rank, world int) ([]byte, []int64, error) {
	bits, ok := hubtest.DTypeBits(dtype)
	if !ok || bits%8 != 0 {
		return nil, nil, fmt.Errorf("shard of %s: only whole-byte dtypes", dtype)
	}
	if dim < 0 || dim >= len(shape) || world <= 0 || rank < 0 || rank >= world {
		return nil, nil, fmt.Errorf("shard %d:%d/%d of shape %v", dim, rank, world, shape)
	}
	size := shape[dim]
	lo, hi := size*int64(rank)/int64(world), size*int64(rank+1)/int64(world)
	outer, inner := int64(1), bits/8
	for _, d := range shape[:dim] {
		outer *= d
	}
	for _, d := range shape[dim+1:] {
		inner *= d
	}
	out := make([]byte, 0, outer*(hi-lo)*inner)
	for o := range outer {
		base := o * size * inner
		out = append(out, data[base+lo*inner:base+hi*inner]...)
	}
	sh := append([]int64(nil), shape...)
	sh[dim] = hi - lo
	return out, sh, nil
}

// shapeHeader renders a shape as X-Tensor-Shape does: "[d0,d1,…]".
func shapeHeader(shape []int64) string {
	s := "["
	for i, d := range shape {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(d)
	}
	return s + "]"
}
