package repofs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

var (
	repo   = hub.MustRepo(hub.Model, "org/m")
	commit = strings.Repeat("c", 40)
)

// fakeResolver answers File with fixed metadata and a download URL that
// changes on every resolve, and counts resolves.
type fakeResolver struct {
	mu       sync.Mutex
	meta     resolver.Meta
	resolves int
	revs     []string
}

func (r *fakeResolver) File(ctx context.Context, c hub.Caller, f hub.FileRef) (resolver.Meta, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resolves++
	r.revs = append(r.revs, f.Rev)
	m := r.meta
	m.DownloadURL = fmt.Sprintf("https://cdn/%d", r.resolves)
	return m, nil
}

func (r *fakeResolver) Invalidate(hub.Caller, hub.FileRef) {}

// fakeUpstream serves data for any URL not marked expired, and counts calls.
type fakeUpstream struct {
	mu      sync.Mutex
	data    []byte
	expired map[string]bool
	gets    []string
	wants   []fetch.Want
}

func (u *fakeUpstream) GetRange(ctx context.Context, url, auth string, want fetch.Want, off, n int64) (io.ReadCloser, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.gets = append(u.gets, fmt.Sprintf("%s %d+%d", url, off, n))
	u.wants = append(u.wants, want)
	if u.expired[url] {
		return nil, fmt.Errorf("cdn 403: %w", fetch.ErrExpired)
	}
	return io.NopCloser(bytes.NewReader(u.data[off : off+n])), nil
}

// GetRanges answers as an upstream that ignores multi-range requests.
func (u *fakeUpstream) GetRanges(context.Context, string, string, fetch.Want, []fetch.Range) (io.ReadCloser, error) {
	return nil, fmt.Errorf("fake: status 200: %w", fetch.ErrNotMultipart)
}

func newFS(t *testing.T, data []byte, etag string) (*FS, *fakeResolver, *fakeUpstream) {
	t.Helper()
	store, err := cache.Open(cache.Options{Dir: t.TempDir(), BlockSize: 4096, ChunkSize: 16384})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	res := &fakeResolver{meta: resolver.Meta{FileMeta: fetch.FileMeta{Commit: commit, ETag: etag, Size: int64(len(data))}}}
	up := &fakeUpstream{data: data, expired: map[string]bool{}}
	return New(res, store, up, Options{}), res, up
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i/7)
	}
	return b
}

// A refused download URL is resolved again, at the commit, once; every
// request says which file it wants.
func TestOriginRefreshesARefusedURLAtTheCommit(t *testing.T) {
	data := pattern(20000)
	fs, res, up := newFS(t, data, sha(data))
	f, err := fs.Open(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	up.expired["https://cdn/1"] = true
	got := make([]byte, 100)
	if _, err := f.ReadAt(got, 5000); err != nil || !bytes.Equal(got, data[5000:5100]) {
		t.Fatalf("read after a refused URL: %v", err)
	}
	if res.resolves != 2 || res.revs[1] != commit {
		t.Errorf("resolves %v, want the second at the commit", res.revs)
	}
	for _, w := range up.wants {
		if w.Size != int64(len(data)) || w.ETag != sha(data) {
			t.Errorf("a request wanted %+v", w)
		}
	}
}

// A file whose ETag names no content hash streams from upstream, uncached,
// and re-reading the byte probed before a response costs no second request.
func TestUncacheableFileStreams(t *testing.T) {
	data := pattern(50000)
	fs, _, up := newFS(t, data, "not-a-hash")
	f, err := fs.Open(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Bypassed() {
		t.Fatal("an uncacheable file is read through the cache")
	}
	f.Expect(0, f.Size())
	var first [1]byte
	if _, err := f.ReadAt(first[:], 0); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("whole read: %v, equal %v", err, bytes.Equal(got, data))
	}
	if len(up.gets) != 1 {
		t.Errorf("upstream requests %v, want one stream", up.gets)
	}
}

// Reads of a cacheable file go through the cache and verify; a second open
// reads the verified blob.
func TestCacheableFileFillsAndPromotes(t *testing.T) {
	data := pattern(40000)
	fs, _, _ := newFS(t, data, sha(data))
	f, err := fs.Open(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	f.Expect(0, f.Size())
	f.VerifyWhole()
	got, err := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
	f.Close()
	if err != nil || !bytes.Equal(got, data) || f.Bypassed() {
		t.Fatalf("whole read: %v, equal %v, bypassed %v", err, bytes.Equal(got, data), f.Bypassed())
	}
	f, err = fs.Open(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := f.Blob()
	if err != nil {
		t.Fatalf("no verified blob after a whole read: %v", err)
	}
	b.Close()
	if _, err := (&File{}).Blob(); !errors.Is(err, cache.ErrNotCached) {
		t.Errorf("Blob of a File without a cache handle: %v", err)
	}
}
