package tensor

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/hubproxy/hubproxy/internal/header"
)

// SubsetHeader builds the header of a safetensors file holding just sel, in
// the order given, packed back to back from offset 0: the 8-byte length, the
// JSON, and space padding to a multiple of 8 so the data buffer is aligned as
// the reference writer aligns it. metadata, when not nil, is the file's
// __metadata__.
func SubsetHeader(sel []header.Tensor, metadata map[string]string) ([]byte, error) {
	// encoding/json writes map keys sorted; the reference writer puts
	// __metadata__ first and tensors in offset order, but readers accept any
	// key order, so a sorted object is a valid file.
	obj := make(map[string]any, len(sel)+1)
	if metadata != nil {
		obj["__metadata__"] = metadata
	}
	var off uint64
	for _, t := range sel {
		if _, dup := obj[t.Name]; dup {
			return nil, fmt.Errorf("tensor %q selected twice", t.Name)
		}
		obj[t.Name] = struct {
			DType       string   `json:"dtype"`
			Shape       []uint64 `json:"shape"`
			DataOffsets []uint64 `json:"data_offsets"`
		}{string(t.DType), nonNil(t.Shape), []uint64{off, off + t.Len()}}
		off += t.Len()
	}
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, err
	}
	body := bytes.TrimRight(js.Bytes(), "\n")
	n := (len(body) + 7) &^ 7
	out := make([]byte, 8+n)
	binary.LittleEndian.PutUint64(out, uint64(n))
	copy(out[8:], body)
	for i := 8 + len(body); i < len(out); i++ {
		out[i] = ' '
	}
	return out, nil
}

// CommonMetadata is the __metadata__ every file agrees on: the keys present
// in all of them with the same value (e.g. "format": "pt"), or nil.
func CommonMetadata(files []File) map[string]string {
	var common map[string]string
	for i, f := range files {
		if i == 0 {
			common = make(map[string]string, len(f.Header.Metadata))
			for k, v := range f.Header.Metadata {
				common[k] = v
			}
			continue
		}
		for k, v := range common {
			if f.Header.Metadata[k] != v {
				delete(common, k)
			}
		}
	}
	if len(common) == 0 {
		return nil
	}
	return common
}

// SortByPlace orders a selection by file and offset, so a subset file reads
// each source file front to back.
func SortByPlace(sel []Selected) {
	sort.SliceStable(sel, func(i, j int) bool {
		if sel[i].File != sel[j].File {
			return sel[i].File < sel[j].File
		}
		return sel[i].Tensor.Begin < sel[j].Tensor.Begin
	})
}
