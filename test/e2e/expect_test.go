package e2e

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// expectations is what client.mjs must observe through the proxy. It is
// written as JSON next to the test's temp dir; the field names are the
// contract with client.mjs.
type expectations struct {
	Repos []repoExpect `json:"repos"`
}

type repoExpect struct {
	Type string `json:"type"` // "model" or "dataset"
	ID   string `json:"id"`
	// Revision is what the client passes as `revision`; empty means the
	// library's default (main, or HEAD for the info calls).
	Revision string `json:"revision,omitempty"`
	Commit   string `json:"commit"`
	// MinTreePages is the fewest /tree pages a recursive listing needs with the
	// fake hub's page size, so the client proves it followed the Link header.
	MinTreePages int           `json:"minTreePages"`
	Files        []fileExpect  `json:"files"`
	Slices       []sliceExpect `json:"slices,omitempty"`
	Safetensors  *stExpect     `json:"safetensors,omitempty"`
}

type fileExpect struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Etag is unquoted: the sha256 for LFS files, the git blob sha1 otherwise
	// (docs/hub-protocol.md §1a).
	Etag string `json:"etag"`
	LFS  bool   `json:"lfs"`
}

type sliceExpect struct {
	Path   string `json:"path"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"` // exclusive, as Blob.slice takes it
	SHA256 string `json:"sha256"`
}

type stExpect struct {
	Sharded bool `json:"sharded"`
	// Path is the file parseSafetensorsMetadata resolves first: the single
	// file, or the index.
	Path string `json:"path"`
	// Shards maps each safetensors file (relative to the index) to its tensors.
	Shards map[string]map[string]tensorExpect `json:"shards"`
	// Metadata is each file's __metadata__, where it has one.
	Metadata       map[string]map[string]string `json:"metadata,omitempty"`
	ParameterCount map[string]int64             `json:"parameterCount"`
}

type tensorExpect struct {
	DType       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets [2]int64 `json:"dataOffsets"`
}

func (e *expectations) write(path string) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// gitBlobSHA1 is the object id git gives a file's content: the etag the Hub
// serves for regular (non-LFS) files.
func gitBlobSHA1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func fileExpectFor(path string, data []byte, lfs bool) fileExpect {
	fe := fileExpect{Path: path, Size: int64(len(data)), SHA256: sha256Hex(data), LFS: lfs}
	if lfs {
		fe.Etag = fe.SHA256
	} else {
		fe.Etag = gitBlobSHA1(data)
	}
	return fe
}

func sliceExpectFor(path string, data []byte, start, end int64) sliceExpect {
	return sliceExpect{Path: path, Start: start, End: end, SHA256: sha256Hex(data[start:end])}
}

// stHeader is one parsed safetensors header: tensors plus __metadata__.
type stHeader struct {
	Tensors  map[string]tensorExpect
	Metadata map[string]string
}

// parseSafetensorsHeader reads the header of a complete safetensors file. It
// is deliberately independent of internal/header so the test does not grade
// the proxy with the proxy's own parser.
func parseSafetensorsHeader(b []byte) (stHeader, error) {
	if len(b) < 8 {
		return stHeader{}, fmt.Errorf("safetensors: %d bytes, too short", len(b))
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n == 0 || n > uint64(len(b)-8) {
		return stHeader{}, fmt.Errorf("safetensors: header length %d out of range", n)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		return stHeader{}, fmt.Errorf("safetensors header: %w", err)
	}
	h := stHeader{Tensors: map[string]tensorExpect{}}
	for name, v := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &h.Metadata); err != nil {
				return stHeader{}, fmt.Errorf("__metadata__: %w", err)
			}
			continue
		}
		var t struct {
			DType       string   `json:"dtype"`
			Shape       []int64  `json:"shape"`
			DataOffsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &t); err != nil {
			return stHeader{}, fmt.Errorf("tensor %q: %w", name, err)
		}
		if t.Shape == nil {
			t.Shape = []int64{}
		}
		h.Tensors[name] = tensorExpect{DType: t.DType, Shape: t.Shape, DataOffsets: t.DataOffsets}
	}
	return h, nil
}

// addParams adds each tensor's element count to its dtype's total, the way
// @huggingface/hub counts parameters for an unquantised model (scalars, whose
// shape is empty, are not counted).
func addParams(counts map[string]int64, tensors map[string]tensorExpect) {
	for _, t := range tensors {
		if len(t.Shape) == 0 {
			continue
		}
		n := int64(1)
		for _, d := range t.Shape {
			n *= d
		}
		counts[t.DType] += n
	}
}

// indexShards returns the distinct shard files named by a
// model.safetensors.index.json, sorted.
func indexShards(index []byte) ([]string, error) {
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(index, &idx); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	set := map[string]bool{}
	for _, f := range idx.WeightMap {
		set[f] = true
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out, nil
}

// pages is how many pages a listing of n entries takes at size per page.
func pages(n, size int) int {
	if size <= 0 {
		return 1
	}
	return (n + size - 1) / size
}

// countDirs is the number of distinct parent folders among paths: a
// recursive tree listing returns one entry per folder as well as per file.
func countDirs(paths []string) int {
	dirs := map[string]bool{}
	for _, p := range paths {
		for i := len(p) - 1; i > 0; i-- {
			if p[i] == '/' {
				dirs[p[:i]] = true
			}
		}
	}
	return len(dirs)
}
