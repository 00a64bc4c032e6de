package hubtest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

type stTensor struct {
	DType       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// parseST is a minimal, independent safetensors check: header length, JSON,
// offsets contiguous from 0 and covering the whole data buffer, and sizes
// matching dtype × shape.
func parseST(t *testing.T, file []byte) (map[string]stTensor, map[string]string, int64) {
	t.Helper()
	if len(file) < 8 {
		t.Fatal("shorter than 8 bytes")
	}
	n := int64(binary.LittleEndian.Uint64(file))
	if n%8 != 0 || 8+n > int64(len(file)) {
		t.Fatalf("header length %d (file %d)", n, len(file))
	}
	hdr := file[8 : 8+n]
	if hdr[0] != '{' || len(bytes.TrimRight(hdr, " ")) < len(hdr)-7 {
		t.Fatalf("header %q", hdr)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		t.Fatalf("header JSON: %v", err)
	}
	var meta map[string]string
	tensors := map[string]stTensor{}
	for k, v := range raw {
		if k == "__metadata__" {
			if err := json.Unmarshal(v, &meta); err != nil {
				t.Fatalf("metadata: %v", err)
			}
			continue
		}
		var ti stTensor
		if err := json.Unmarshal(v, &ti); err != nil {
			t.Fatalf("tensor %s: %v", k, err)
		}
		tensors[k] = ti
	}
	names := make([]string, 0, len(tensors))
	for k := range tensors {
		names = append(names, k)
	}
	// Sorted by (begin, end) as the reference reader does, so a zero-length
	// tensor sorts before the one that starts where it does.
	sort.Slice(names, func(i, j int) bool {
		a, b := tensors[names[i]].DataOffsets, tensors[names[j]].DataOffsets
		return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
	})
	var cursor int64
	for _, k := range names {
		ti := tensors[k]
		if ti.DataOffsets[0] != cursor || ti.DataOffsets[1] < cursor {
			t.Fatalf("tensor %s offsets %v, cursor %d", k, ti.DataOffsets, cursor)
		}
		bits, _ := DTypeBits(ti.DType)
		elems := int64(1)
		for _, d := range ti.Shape {
			elems *= d
		}
		if elems*bits/8 != ti.DataOffsets[1]-ti.DataOffsets[0] {
			t.Fatalf("tensor %s: %d bytes for %s%v", k, ti.DataOffsets[1]-ti.DataOffsets[0], ti.DType, ti.Shape)
		}
		cursor = ti.DataOffsets[1]
	}
	if 8+n+cursor != int64(len(file)) {
		t.Fatalf("data buffer %d bytes, tensors cover %d", int64(len(file))-8-n, cursor)
	}
	return tensors, meta, 8 + n
}

func TestSafetensors(t *testing.T) {
	given := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	tensors := []Tensor{
		{Name: "z.bias", DType: "F32", Shape: []int64{2}, Data: given},
		{Name: "a.weight", DType: "BF16", Shape: []int64{3, 5}},
		{Name: "scalar", DType: "F64"},
		{Name: "empty", DType: "I8", Shape: []int64{0, 4}},
		{Name: "fp4", DType: "F4", Shape: []int64{6}},
		{Name: "fp6", DType: "F6_E2M3", Shape: []int64{4}},
		{Name: "flags", DType: "BOOL", Shape: []int64{3}},
		{Name: "q\"uote", DType: "F8_E4M3", Shape: []int64{1}},
	}
	file := Safetensors(tensors, map[string]string{"format": "pt", "b": "x"})
	got, meta, dataStart := parseST(t, file)
	if meta["format"] != "pt" || meta["b"] != "x" || len(got) != len(tensors) {
		t.Fatalf("meta %v, %d tensors", meta, len(got))
	}
	wantSizes := map[string]int64{"z.bias": 8, "a.weight": 30, "scalar": 8, "empty": 0, "fp4": 3, "fp6": 3, "flags": 3, "q\"uote": 1}
	var off int64
	for _, tn := range tensors { // laid out in the given order
		ti := got[tn.Name]
		if ti.DataOffsets[0] != off || ti.DataOffsets[1]-off != wantSizes[tn.Name] {
			t.Errorf("%s at %v, want start %d size %d", tn.Name, ti.DataOffsets, off, wantSizes[tn.Name])
		}
		off = ti.DataOffsets[1]
	}
	if !bytes.Equal(file[dataStart:dataStart+8], given) {
		t.Error("given data not stored")
	}
	if !bytes.Equal(file, Safetensors(tensors, map[string]string{"b": "x", "format": "pt"})) {
		t.Error("not deterministic")
	}
	if !bytes.HasPrefix(file[8:], []byte(`{"__metadata__":`)) {
		t.Error("__metadata__ is not first")
	}

	empty := Safetensors(nil, nil)
	if _, _, end := parseST(t, empty); end != 16 || string(empty[8:]) != "{}      " {
		t.Errorf("empty file %q", empty)
	}

	for name, bad := range map[string][]Tensor{
		"unknown dtype": {{Name: "x", DType: "F128", Shape: []int64{1}}},
		"wrong length":  {{Name: "x", DType: "F32", Shape: []int64{2}, Data: []byte{1}}},
		"duplicate":     {{Name: "x", DType: "U8"}, {Name: "x", DType: "U8"}},
		"reserved":      {{Name: "__metadata__", DType: "U8"}},
		"sub-byte":      {{Name: "x", DType: "F4", Shape: []int64{3}}},
		"overflow":      {{Name: "x", DType: "F64", Shape: []int64{1 << 40, 1 << 40}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			Safetensors(bad, nil)
		}()
	}
}

func TestRandomBytes(t *testing.T) {
	a, b, c := RandomBytes(1, 1000), RandomBytes(1, 1000), RandomBytes(2, 1000)
	if !bytes.Equal(a, b) || bytes.Equal(a, c) || !bytes.Equal(RandomBytes(1, 10), a[:10]) {
		t.Error("RandomBytes is not a deterministic per-seed stream")
	}
	if bytes.Count(a, []byte{0}) > 50 {
		t.Error("RandomBytes does not look random")
	}
}

func TestShardedModel(t *testing.T) {
	for _, prefix := range []string{"", "unet/diffusion_pytorch_model"} {
		files := ShardedModel(prefix, 3, 2, 4, 8)
		if len(files) != 4 {
			t.Fatalf("%d files", len(files))
		}
		byPath := map[string][]byte{}
		for _, f := range files {
			byPath[f.Path] = f.Data
		}
		stem := prefix
		if stem == "" {
			stem = "model"
		}
		dir := ""
		if i := strings.LastIndexByte(stem, '/'); i >= 0 {
			dir = stem[:i+1]
		}
		var index struct {
			Metadata struct {
				TotalSize int64 `json:"total_size"`
			}
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(byPath[stem+".safetensors.index.json"], &index); err != nil {
			t.Fatalf("index: %v", err)
		}
		var total int64
		listed := 0
		for p, data := range byPath {
			if !strings.HasSuffix(p, ".safetensors") {
				continue
			}
			tensors, meta, _ := parseST(t, data)
			if meta["format"] != "pt" {
				t.Errorf("%s metadata %v", p, meta)
			}
			for name, ti := range tensors {
				listed++
				total += ti.DataOffsets[1] - ti.DataOffsets[0]
				if dir+index.WeightMap[name] != p || ti.DType != "BF16" || len(ti.Shape) != 2 || ti.Shape[0] != 4 || ti.Shape[1] != 8 {
					t.Errorf("%s in %s: weight_map says %q, %+v", name, p, index.WeightMap[name], ti)
				}
			}
		}
		if listed != 6 || len(index.WeightMap) != 6 || total != index.Metadata.TotalSize || total != 6*4*8*2 {
			t.Errorf("%d tensors, weight_map %d, total %d, total_size %d", listed, len(index.WeightMap), total, index.Metadata.TotalSize)
		}
		if _, ok := byPath[dir+strings.TrimPrefix(stem, dir)+"-00002-of-00003.safetensors"]; !ok {
			t.Errorf("shard names: %v", files)
		}
	}
	// Different stems give different bytes, so a content-addressed cache
	// cannot confuse two fixtures.
	if bytes.Equal(ShardedModel("a", 1, 1, 2, 2)[0].Data, ShardedModel("b", 1, 1, 2, 2)[0].Data) {
		t.Error("stems share bytes")
	}

	h := NewT(t, Options{})
	h.AddRepo(RepoSpec{ID: "acme/sharded", Files: ShardedModel("", 2, 1, 2, 2)})
	shard, _ := h.Stat(hubRepo("acme/sharded"), "main", "model-00001-of-00002.safetensors")
	index, _ := h.Stat(hubRepo("acme/sharded"), "main", "model.safetensors.index.json")
	if !shard.LFS || index.LFS || shard.ETag != shard.SHA256 || index.ETag != index.OID {
		t.Errorf("shard %+v, index %+v", shard, index)
	}
}
