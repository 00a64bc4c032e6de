package tensor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// testRepo is the repo the tests ask about; the fake serves any repo alike.
func testRepo() hub.Repo { return hub.MustRepo(hub.Model, "org/model") }

// testRef is path (or, for "", the repo's own safetensors) of testRepo at
// main.
func testRef(path string) hub.FileRef { return hub.FileRef{Repo: testRepo(), Rev: "main", Path: path} }

const fakeCommit = "0123456789abcdef0123456789abcdef01234567"

// fakeFiles serves files from memory and counts every resolution (Stat). A path it does
// not hold is missing upstream: Stat answers 404 EntryNotFound, after asking
// missing (when set), which may block or answer otherwise.
type fakeFiles struct {
	files   map[string][]byte
	missing func(ctx context.Context, path string) error

	mu    sync.Mutex
	opens map[string]int
	total int
	reads int // Open calls
}

func newFakeFiles(files map[string][]byte) *fakeFiles {
	return &fakeFiles{files: files, opens: map[string]int{}}
}

// Stat resolves p as the resolver would: missing (when set) is asked about
// a path the fake does not hold.
func (f *fakeFiles) Stat(ctx context.Context, _ hub.Caller, ref hub.FileRef) (resolver.Meta, error) {
	p := ref.Path
	f.mu.Lock()
	f.opens[p]++
	f.total++
	f.mu.Unlock()
	data, ok := f.files[p]
	if !ok {
		if f.missing != nil {
			if err := f.missing(ctx, p); err != nil {
				return resolver.Meta{}, err
			}
		}
		return resolver.Meta{}, notFound(p)
	}
	sum := sha256.Sum256(data)
	return fakeMeta(`"`+hex.EncodeToString(sum[:])+`"`, int64(len(data))), nil
}

func (f *fakeFiles) Open(ctx context.Context, _ hub.Caller, ref hub.FileRef) (Blob, error) {
	p := ref.Path
	f.mu.Lock()
	f.reads++
	f.mu.Unlock()
	data, ok := f.files[p]
	if !ok {
		return nil, notFound(p)
	}
	return &memBlob{data: data}, nil
}

// fakeMeta is a resolution at fakeCommit.
func fakeMeta(etag string, size int64) resolver.Meta {
	return resolver.Meta{FileMeta: fetch.FileMeta{Commit: fakeCommit, ETag: etag, Size: size}}
}

// Opens is the number of Stat calls so far: the resolutions, each of which
// asks upstream (Open of a resolved file reads the cache).
func (f *fakeFiles) Opens() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

// Reads is the number of Open calls so far.
func (f *fakeFiles) Reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// OpensOf is the number of Stat calls for paths with the given prefix.
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

// A tensor request opens its file once when the header is cached and twice
// when it is not (the shared header read, then the tensor): locating the
// file and finding its header's ETag are resolutions, never opens.
func TestTensorOpensItsFileOnceOrTwice(t *testing.T) {
	head, size := syntheticFile(4, "")
	fake := newFakeFiles(map[string][]byte{"model.safetensors": pad(head, size)})
	s := New(fake, Options{})
	name := "model.layers.0.mlp.experts.1.down_proj.weight"
	for i, want := range []int{2, 1} {
		before := fake.Reads()
		o, err := s.OpenTensor(t.Context(), hub.Caller{}, testRef(""), name, Part{})
		if err != nil {
			t.Fatal(err)
		}
		o.Close()
		if got := fake.Reads() - before; got != want {
			t.Errorf("request %d opened the file %d times, want %d", i+1, got, want)
		}
	}
}
