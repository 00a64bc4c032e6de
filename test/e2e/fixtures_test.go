package e2e

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// treePageSize is the fake hub's tree page size: small, so every recursive
// listing spans several pages and the client must follow the proxy's Link.
const treePageSize = 4

// bigFileSize is the large LFS file's size: big enough to cross the proxy's
// fill chunks several times, small enough to keep the run fast under -race.
const bigFileSize = 20 << 20

// repoFixture is one repository the test puts on the fake hub, together with
// what the client must observe in it.
type repoFixture struct {
	typ hub.RepoType // "" means a model
	id  string
	// revision, when set, is a ref created by a second commit on an existing
	// repo (e.g. "refs/pr/1"); the client then passes it as `revision`.
	revision string
	files    []hubtest.File
	// slices are [start, end) byte ranges the client reads via Blob.slice.
	slices []sliceSpec
	// stPath names the safetensors file (or index) parseSafetensorsMetadata
	// must find; empty when the repo holds none.
	stPath string
	// declared are the tensors the fixture asked for, so the expectations
	// (read back from the bytes) are checked against intent, not only
	// against hubtest's writer.
	declared []hubtest.Tensor
}

type sliceSpec struct {
	path       string
	start, end int64
}

// configJSON is a minimal, unquantised transformers config: parseSafetensors-
// Metadata downloads it when counting parameters.
func configJSON(arch string) []byte {
	b, _ := json.MarshalIndent(map[string]any{
		"architectures": []string{arch},
		"model_type":    "e2e",
		"hidden_size":   64,
	}, "", "  ")
	return b
}

// bigRepo has a ~20 MB LFS file, small regular files, and enough nested
// folders to need several tree pages.
func bigRepo() repoFixture {
	files := []hubtest.File{
		{Path: "config.json", Data: configJSON("BigForTest")},
		{Path: "weights/big.bin", Data: hubtest.RandomBytes(1, bigFileSize)},
		{Path: "README.md", Data: []byte("# e2e/big\n\nA repository for the hubproxy end-to-end test.\n")},
	}
	for i := range 8 {
		dir := "data"
		if i%2 == 1 {
			dir = "data/nested/deeper"
		}
		files = append(files, hubtest.File{
			Path: fmt.Sprintf("%s/part-%02d.txt", dir, i),
			Data: fmt.Appendf(nil, "part %d\n%s\n", i, strings.Repeat("x", 100*i)),
		})
	}
	return repoFixture{
		id:    "e2e/big",
		files: files,
		slices: []sliceSpec{
			{"weights/big.bin", 0, 1},
			{"weights/big.bin", 123_457, 123_457 + 1<<20},
			{"weights/big.bin", 5<<20 + 17, 13<<20 + 3}, // crosses several fill chunks
			{"weights/big.bin", bigFileSize - 1000, bigFileSize},
			{"config.json", 2, 20},
		},
	}
}

// singleRepo has one model.safetensors with a mix of dtypes and shapes.
func singleRepo() repoFixture {
	tensors := []hubtest.Tensor{
		{Name: "embed.weight", DType: "F32", Shape: []int64{64, 128}, Data: hubtest.RandomBytes(10, 64*128*4)},
		{Name: "layers.0.attn.q.weight", DType: "F16", Shape: []int64{128, 64}, Data: hubtest.RandomBytes(11, 128*64*2)},
		{Name: "layers.0.attn.q.bias", DType: "BF16", Shape: []int64{128}, Data: hubtest.RandomBytes(12, 128*2)},
		{Name: "layers.0.norm.weight", DType: "F32", Shape: []int64{4, 4, 8}, Data: hubtest.RandomBytes(13, 4*4*8*4)},
		{Name: "position_ids", DType: "I64", Shape: []int64{512}, Data: hubtest.RandomBytes(14, 512*8)},
	}
	st := hubtest.Safetensors(tensors, map[string]string{"format": "pt", "producer": "hubproxy-e2e"})
	n := int64(len(st))
	return repoFixture{
		id: "e2e/single",
		files: []hubtest.File{
			{Path: "config.json", Data: configJSON("SingleForTest")},
			{Path: "model.safetensors", Data: st},
		},
		slices: []sliceSpec{
			{"model.safetensors", 0, 8},
			{"model.safetensors", 8, 200},
			{"model.safetensors", n / 3, n - 1},
		},
		stPath:   "model.safetensors",
		declared: tensors,
	}
}

// shardedRepo has three safetensors shards and their index.
func shardedRepo() repoFixture {
	files := append([]hubtest.File{{Path: "config.json", Data: configJSON("ShardedForTest")}},
		hubtest.ShardedModel("model", 3, 4, 96, 64)...)
	return repoFixture{
		id:     "e2e/sharded",
		files:  files,
		stPath: "model.safetensors.index.json",
	}
}

// datasetRepo is a dataset, so the client's "datasets/" URL prefix is
// exercised on every route.
func datasetRepo() repoFixture {
	parquet := hubtest.RandomBytes(20, 3<<20+5)
	return repoFixture{
		typ: hub.Dataset,
		id:  "e2e/data",
		files: []hubtest.File{
			{Path: "README.md", Data: []byte("---\nlicense: mit\n---\n# e2e/data\n")},
			{Path: "data/train-00000-of-00001.parquet", Data: parquet},
			{Path: "data/labels.csv", Data: []byte("id,label\n1,cat\n2,dog\n")},
		},
		slices: []sliceSpec{
			{"data/train-00000-of-00001.parquet", 1 << 20, 2<<20 + 99},
			{"data/train-00000-of-00001.parquet", int64(len(parquet)) - 8, int64(len(parquet))},
		},
	}
}

// prRevision is a second commit on e2e/single reachable only as "refs/pr/1":
// the client sends it percent-encoded to /resolve/ and /revision/, and
// unencoded to /tree/ (docs/hub-protocol.md §0).
func prRevision() repoFixture {
	tensors := []hubtest.Tensor{
		{Name: "lm_head.weight", DType: "F16", Shape: []int64{32, 256}, Data: hubtest.RandomBytes(30, 32*256*2)},
		{Name: "lm_head.bias", DType: "F32", Shape: []int64{32}, Data: hubtest.RandomBytes(31, 32*4)},
	}
	return repoFixture{
		id:       "e2e/single",
		revision: "refs/pr/1",
		files: []hubtest.File{
			{Path: "config.json", Data: configJSON("SingleForTestPR")},
			{Path: "model.safetensors", Data: hubtest.Safetensors(tensors, nil)},
			{Path: "extra/notes.txt", Data: []byte("only on the PR\n")},
		},
		slices:   []sliceSpec{{"model.safetensors", 100, 5000}},
		stPath:   "model.safetensors",
		declared: tensors,
	}
}

// install puts f on the fake hub and returns what the client must see.
func (f repoFixture) install(t *testing.T, h *hubtest.Hub) repoExpect {
	t.Helper()
	typ := f.typ
	if typ == "" {
		typ = hub.Model
	}
	repo := hub.MustRepo(typ, f.id)
	var commit string
	if f.revision == "" {
		commit = h.AddRepo(hubtest.RepoSpec{Type: typ, ID: f.id, Files: f.files})
	} else {
		commit = h.Commit(repo, f.revision, f.files)
	}
	re := repoExpect{Type: string(typ), ID: f.id, Revision: f.revision, Commit: commit}

	data := map[string][]byte{}
	var paths []string
	for _, file := range f.files {
		info, ok := h.Stat(repo, commit, file.Path)
		if !ok {
			t.Fatalf("fixture: hub has no %s/%s right after AddRepo", f.id, file.Path)
		}
		fe := fileExpectFor(file.Path, file.Data, info.LFS)
		if info.ETag != fe.Etag || info.Size != fe.Size {
			t.Fatalf("fixture: hub says %s has etag %s size %d; the test computed %s size %d",
				file.Path, info.ETag, info.Size, fe.Etag, fe.Size)
		}
		re.Files = append(re.Files, fe)
		data[file.Path] = file.Data
		paths = append(paths, file.Path)
	}
	re.MinTreePages = pages(len(paths)+countDirs(paths), treePageSize)

	for _, s := range f.slices {
		re.Slices = append(re.Slices, sliceExpectFor(s.path, data[s.path], s.start, s.end))
	}
	if f.stPath != "" {
		re.Safetensors = safetensorsExpect(t, f.stPath, data)
	}
	if len(f.declared) > 0 {
		checkDeclared(t, f.declared, re.Safetensors.Shards[f.stPath])
	}
	return re
}

// safetensorsExpect derives what parseSafetensorsMetadata must return from
// the fixture's bytes, parsing them with the test's own reader.
func safetensorsExpect(t *testing.T, stPath string, data map[string][]byte) *stExpect {
	t.Helper()
	se := &stExpect{
		Path:           stPath,
		Shards:         map[string]map[string]tensorExpect{},
		Metadata:       map[string]map[string]string{},
		ParameterCount: map[string]int64{},
	}
	files := []string{stPath}
	dir := ""
	if strings.HasSuffix(stPath, ".index.json") {
		se.Sharded = true
		shards, err := indexShards(data[stPath])
		if err != nil {
			t.Fatalf("fixture %s: %v", stPath, err)
		}
		if len(shards) < 2 {
			t.Fatalf("fixture %s: index names %d shard(s), want several", stPath, len(shards))
		}
		files = shards
		if d := path.Dir(stPath); d != "." {
			dir = d + "/"
		}
	}
	for _, name := range files {
		b, ok := data[dir+name]
		if !ok {
			t.Fatalf("fixture: %s names %s, which the repo lacks", stPath, dir+name)
		}
		h, err := parseSafetensorsHeader(b)
		if err != nil {
			t.Fatalf("fixture %s: %v", name, err)
		}
		if len(h.Tensors) == 0 {
			t.Fatalf("fixture %s: no tensors", name)
		}
		se.Shards[name] = h.Tensors
		if h.Metadata != nil {
			se.Metadata[name] = h.Metadata
		}
		addParams(se.ParameterCount, h.Tensors)
	}
	return se
}

// checkDeclared fails the test when the safetensors bytes do not hold exactly
// the tensors the fixture declared.
func checkDeclared(t *testing.T, declared []hubtest.Tensor, got map[string]tensorExpect) {
	t.Helper()
	if len(got) != len(declared) {
		t.Fatalf("fixture: safetensors holds %d tensors, declared %d", len(got), len(declared))
	}
	for _, d := range declared {
		g, ok := got[d.Name]
		if !ok || g.DType != d.DType || fmt.Sprint(g.Shape) != fmt.Sprint(d.Shape) ||
			g.DataOffsets[1]-g.DataOffsets[0] != int64(len(d.Data)) {
			t.Fatalf("fixture: tensor %s is %+v in the file, declared %s %v (%d bytes)",
				d.Name, g, d.DType, d.Shape, len(d.Data))
		}
	}
}
