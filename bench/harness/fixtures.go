package harness

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// The benchmark's repositories and files on the fake hub.
const (
	largeRepo   = "bench/large"
	herdRepo    = "bench/herd"
	clusterRepo = "bench/cluster"
	shardedRepo = "bench/sharded"
	weightsFile = "model.safetensors"
	indexFile   = "model.safetensors.index.json"
)

// fixtures are the synthetic models, generated once per run and held by the
// fake hub in memory (one copy each: the hub keeps Data by reference).
type fixtures struct {
	large       modelFile
	herd        modelFile
	cluster     modelFile // the large model itself when the sizes match
	shardFiles  []string  // shard paths in index order
	shardBytes  int64     // sum of the shards' sizes
	shardHeader int64     // sum of the shards' 8-byte prefix + header lengths
}

// modelFile is one safetensors file of a repo.
type modelFile struct {
	repo    string
	path    string
	size    int64
	sha256  [32]byte // zero unless Config.Verify
	tensors []string // names in file order
	// tensorLen is the byte length of every tensor of the file.
	tensorLen int64
	// data is the file itself, the slice the fake hub serves (no copy):
	// the S3 scenario uploads it into MinIO.
	data []byte
}

// pick is the tensor scenario 4 fetches: the middle one, so neither the
// header's slice nor the file's end helps any client.
func (m modelFile) pick() string { return m.tensors[len(m.tensors)/2] }

// uniformSafetensors builds a safetensors file of count BF16 tensors of
// tensorLen bytes each, named "model.layers.{i}.weight", filled with a
// ChaCha8 stream from seed. Unlike hubtest.Safetensors it allocates the file
// once and writes the data in place, so a multi-GiB file costs its own size
// in memory and no more.
func uniformSafetensors(seed uint64, count int, tensorLen int64) (data []byte, names []string) {
	cols := int64(64)
	rows := tensorLen / 2 / cols
	type entry struct {
		DType       string   `json:"dtype"`
		Shape       []int64  `json:"shape"`
		DataOffsets [2]int64 `json:"data_offsets"`
	}
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	for i := range count {
		name := "model.layers." + strconv.Itoa(i) + ".weight"
		names = append(names, name)
		off := int64(i) * tensorLen
		hdr[name] = entry{DType: "BF16", Shape: []int64{rows, cols}, DataOffsets: [2]int64{off, off + tensorLen}}
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		panic(fmt.Sprintf("harness: marshal header: %v", err)) // plain maps and structs always marshal
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	start := 8 + int64(len(js))
	data = make([]byte, start+int64(count)*tensorLen)
	binary.LittleEndian.PutUint64(data, uint64(len(js)))
	copy(data[8:], js)
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	_, _ = rand.NewChaCha8(s).Read(data[start:]) // never fails
	return data, names
}

// addFixtures generates the models of cfg and adds them to h. A model's
// files are "model.safetensors", or shards plus "model.safetensors.index.json".
func addFixtures(h *hubtest.Hub, cfg Config) fixtures {
	var fx fixtures
	single := func(repo string, seed uint64, size, tensorLen int64) modelFile {
		count := int(size / tensorLen)
		data, names := uniformSafetensors(seed, count, tensorLen)
		h.AddRepo(hubtest.RepoSpec{ID: repo, Files: []hubtest.File{
			{Path: "config.json", Data: []byte(`{"model_type":"bench"}`)},
			{Path: weightsFile, Data: data},
		}})
		m := modelFile{repo: repo, path: weightsFile, size: int64(len(data)), tensors: names, tensorLen: tensorLen, data: data}
		if cfg.Verify {
			m.sha256 = sha256.Sum256(data)
		}
		return m
	}
	fx.large = single(largeRepo, 1, cfg.LargeSize, cfg.TensorSize)
	herdTensor := min(cfg.TensorSize, cfg.HerdSize/2) / 128 * 128
	fx.herd = single(herdRepo, 2, cfg.HerdSize, herdTensor)
	fx.cluster = fx.large
	if cfg.ClusterSize != cfg.LargeSize {
		fx.cluster = single(clusterRepo, 3, cfg.ClusterSize, min(cfg.TensorSize, cfg.ClusterSize/2)/128*128)
	}

	files := hubtest.ShardedModel("", cfg.Shards, cfg.ShardTensors, cfg.ShardRows, cfg.ShardCols)
	for _, f := range files {
		if f.Path == indexFile {
			continue
		}
		fx.shardFiles = append(fx.shardFiles, f.Path)
		fx.shardBytes += int64(len(f.Data))
		fx.shardHeader += 8 + int64(binary.LittleEndian.Uint64(f.Data))
	}
	h.AddRepo(hubtest.RepoSpec{ID: shardedRepo, Files: files})
	return fx
}

// fileURL is the /resolve/ URL of repo's path at main under base.
func fileURL(base, repo, path string) string {
	return base + "/" + repo + "/resolve/main/" + path
}
