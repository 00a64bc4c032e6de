package tensor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// testRepo is the repo the tests ask about; the fake serves any repo alike.
func testRepo() hub.Repo { return hub.MustRepo(hub.Model, "org/model") }

const fakeCommit = "0123456789abcdef0123456789abcdef01234567"

// fakeFiles serves files from memory and counts every Open. A path it does
// not hold is missing upstream: Open answers 404 EntryNotFound, after asking
// missing (when set), which may block or answer otherwise.
type fakeFiles struct {
	files   map[string][]byte
	missing func(ctx context.Context, path string) error

	mu    sync.Mutex
	opens map[string]int
	total int
}

func newFakeFiles(files map[string][]byte) *fakeFiles {
	return &fakeFiles{files: files, opens: map[string]int{}}
}

func (f *fakeFiles) Open(ctx context.Context, auth string, repo hub.Repo, rev, p string) (FileInfo, Blob, error) {
	f.mu.Lock()
	f.opens[p]++
	f.total++
	f.mu.Unlock()
	data, ok := f.files[p]
	if !ok {
		if f.missing != nil {
			if err := f.missing(ctx, p); err != nil {
				return FileInfo{}, nil, err
			}
		}
		return FileInfo{}, nil, notFound(p)
	}
	sum := sha256.Sum256(data)
	return FileInfo{Path: p, Commit: fakeCommit, ETag: `"` + hex.EncodeToString(sum[:]) + `"`, Size: int64(len(data))},
		&memBlob{data: data}, nil
}

// Opens is the number of Open calls so far.
func (f *fakeFiles) Opens() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

// OpensOf is the number of Open calls for paths with the given prefix.
func (f *fakeFiles) OpensOf(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for p, c := range f.opens {
		if strings.HasPrefix(p, prefix) {
			n += c
		}
	}
	return n
}

// notFound is what the fetch layer answers for a file missing upstream.
func notFound(p string) error {
	return &fetch.StatusError{Code: 404, ErrorCode: "EntryNotFound", Message: "Entry not found", URL: "https://hub.test/" + p}
}

// shardIndex is an index that puts one tensor in each of n shards.
func shardIndex(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"metadata":{"total_size":0},"weight_map":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"layers.%d.weight":"model-%05d-of-%05d.safetensors"`, i, i+1, n)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}
