package hubtest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/bits"
	"math/rand/v2"
	"path"
	"sort"
	"strconv"
)

// RandomBytes returns n deterministic pseudo-random bytes for seed, from a
// ChaCha8 stream: fast enough for gigabyte fixtures, and the same on every
// run and platform.
func RandomBytes(seed uint64, n int) []byte {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(s).Read(b) // never fails
	return b
}

// seedOf derives a RandomBytes seed from a name.
func seedOf(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// Tensor is one tensor of a synthetic safetensors file.
type Tensor struct {
	Name  string
	DType string // a safetensors dtype name: "F32", "BF16", "I8", "F4", …
	Shape []int64
	// Data is the tensor's bytes, which must be exactly the size dtype and
	// shape imply. nil fills it with RandomBytes seeded by the name.
	Data []byte
}

// DTypeBits is the element width of a safetensors dtype in bits, and false
// for names safetensors does not know (docs/safetensors.md §3).
func DTypeBits(dtype string) (int64, bool) {
	switch dtype {
	case "F4":
		return 4, true
	case "F6_E2M3", "F6_E3M2":
		return 6, true
	case "BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ":
		return 8, true
	case "I16", "U16", "F16", "BF16":
		return 16, true
	case "I32", "U32", "F32":
		return 32, true
	case "C64", "F64", "I64", "U64":
		return 64, true
	}
	return 0, false
}

// TensorBytes is the byte length of a tensor, computed in bits as the
// reference reader does; it fails on unknown dtypes, negative dimensions,
// overflow and sub-byte tensors that do not end on a byte boundary.
func TensorBytes(dtype string, shape []int64) (int64, error) {
	b, ok := DTypeBits(dtype)
	if !ok {
		return 0, fmt.Errorf("unknown dtype %q", dtype)
	}
	n := uint64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d", d)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > 1<<62 {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
		n = lo
	}
	hi, total := bits.Mul64(n, uint64(b))
	if hi != 0 || total > 1<<62 {
		return 0, fmt.Errorf("shape %v overflows", shape)
	}
	if total%8 != 0 {
		return 0, fmt.Errorf("%s tensor of shape %v does not end on a byte boundary", dtype, shape)
	}
	return int64(total / 8), nil
}

// Safetensors builds a valid safetensors file as the reference writer lays
// it out: an 8-byte little-endian header length, a compact JSON header
// ("__metadata__" first when metadata is non-nil, then the tensors in the
// given order) padded with spaces to a multiple of 8, and the tensors' data
// packed back to back from offset 0 in that order. It panics on an invalid
// tensor (unknown dtype, wrong data length, duplicate or reserved name), as
// a fixture error is a bug in the caller.
func Safetensors(tensors []Tensor, metadata map[string]string) []byte {
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	sep := ""
	if metadata != nil {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		hdr.WriteString(`"__metadata__":{`)
		for i, k := range keys {
			if i > 0 {
				hdr.WriteByte(',')
			}
			hdr.Write(jsonString(k))
			hdr.WriteByte(':')
			hdr.Write(jsonString(metadata[k]))
		}
		hdr.WriteByte('}')
		sep = ","
	}
	datas := make([][]byte, len(tensors))
	seen := map[string]bool{}
	var off int64
	for i, t := range tensors {
		if t.Name == "" || t.Name == "__metadata__" || seen[t.Name] {
			panic(fmt.Sprintf("hubtest.Safetensors: bad or duplicate tensor name %q", t.Name))
		}
		seen[t.Name] = true
		n, err := TensorBytes(t.DType, t.Shape)
		if err != nil {
			panic(fmt.Sprintf("hubtest.Safetensors: tensor %q: %v", t.Name, err))
		}
		data := t.Data
		if data == nil {
			data = RandomBytes(seedOf(t.Name), int(n))
		} else if int64(len(data)) != n {
			panic(fmt.Sprintf("hubtest.Safetensors: tensor %q has %d bytes, its shape needs %d", t.Name, len(data), n))
		}
		datas[i] = data
		hdr.WriteString(sep)
		sep = ","
		hdr.Write(jsonString(t.Name))
		fmt.Fprintf(&hdr, `:{"dtype":%s,"shape":[`, jsonString(t.DType))
		for j, d := range t.Shape {
			if j > 0 {
				hdr.WriteByte(',')
			}
			hdr.WriteString(strconv.FormatInt(d, 10))
		}
		fmt.Fprintf(&hdr, `],"data_offsets":[%d,%d]}`, off, off+n)
		off += n
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}

	out := make([]byte, 8, 8+int64(hdr.Len())+off)
	binary.LittleEndian.PutUint64(out, uint64(hdr.Len()))
	out = append(out, hdr.Bytes()...)
	for _, d := range datas {
		out = append(out, d...)
	}
	return out
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// ShardedModel returns a sharded checkpoint as transformers saves one:
// shards "{stem}-00001-of-0000N.safetensors" and "{stem}.safetensors.index.json"
// whose weight_map names each tensor's shard (relative to the index's
// folder) and whose metadata.total_size is the sum of the tensor bytes.
// prefix is the stem, folder included ("model", "unet/diffusion_pytorch_model");
// "" means "model". Every shard holds tensorsPerShard BF16 tensors of shape
// [rows, cols] named "model.layers.{i}.weight", numbered across shards, with
// data seeded by stem and name so different stems give different bytes. The
// shards are LFS files, the index a regular one. One shard is still named
// and indexed as a shard.
func ShardedModel(prefix string, shards, tensorsPerShard int, rows, cols int64) []File {
	stem := prefix
	if stem == "" {
		stem = "model"
	}
	dir, base := path.Dir(stem), path.Base(stem)
	join := func(name string) string {
		if dir == "." {
			return name
		}
		return dir + "/" + name
	}
	n, err := TensorBytes("BF16", []int64{rows, cols})
	if err != nil {
		panic(fmt.Sprintf("hubtest.ShardedModel: %v", err))
	}
	weightMap := map[string]string{}
	var total int64
	files := make([]File, 0, shards+1)
	for s := 1; s <= shards; s++ {
		name := fmt.Sprintf("%s-%05d-of-%05d.safetensors", base, s, shards)
		ts := make([]Tensor, tensorsPerShard)
		for i := range ts {
			tn := fmt.Sprintf("model.layers.%d.weight", (s-1)*tensorsPerShard+i)
			ts[i] = Tensor{Name: tn, DType: "BF16", Shape: []int64{rows, cols}, Data: RandomBytes(seedOf(stem+"\x00"+tn), int(n))}
			weightMap[tn] = name
			total += n
		}
		files = append(files, File{Path: join(name), Data: Safetensors(ts, map[string]string{"format": "pt"})})
	}
	index, err := json.MarshalIndent(map[string]any{
		"metadata":   map[string]int64{"total_size": total},
		"weight_map": weightMap,
	}, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("hubtest.ShardedModel: %v", err))
	}
	return append(files, File{Path: join(base + ".safetensors.index.json"), Data: index})
}
