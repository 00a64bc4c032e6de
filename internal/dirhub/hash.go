package dirhub

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// errChanged means a file changed while it was being hashed.
var errChanged = errors.New("dirhub: file changed while hashing")

// hashKey names one version of one file: a file that is rewritten gets a new
// size or modification time, and so a new key.
type hashKey struct {
	rel   string
	size  int64
	mtime int64 // UnixNano
	kind  hub.HashKind
}

// hasher computes file hashes once per hashKey, single-flight, on its own
// context so that a request giving up does not waste the work.
type hasher struct {
	ctx  context.Context // cancelled by Hub.Close
	root *os.Root
	sem  chan struct{} // HashWorkers tokens
	done *lru.Cache[hashKey, string]
	wg   sync.WaitGroup

	mu       sync.Mutex
	inflight map[hashKey]*hashCall // guarded by mu
}

// hashCall is one hash in flight; done is closed when sum or err is set.
type hashCall struct {
	done chan struct{}
	sum  string
	err  error
}

// wait returns the hash, or ctx's error if ctx ends first.
func (c *hashCall) wait(ctx context.Context) (string, error) {
	select {
	case <-c.done:
		return c.sum, c.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// start returns the call computing k, starting it if none is in flight and
// the result is not cached.
func (h *hasher) start(k hashKey) *hashCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sum, ok := h.done.Get(k); ok {
		c := &hashCall{done: make(chan struct{}), sum: sum}
		close(c.done)
		return c
	}
	if c := h.inflight[k]; c != nil {
		return c
	}
	c := &hashCall{done: make(chan struct{})}
	if err := h.ctx.Err(); err != nil {
		c.err = err
		close(c.done)
		return c
	}
	h.inflight[k] = c
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		sum, err := h.compute(k)
		h.mu.Lock()
		delete(h.inflight, k)
		if err == nil {
			h.done.Add(k, sum)
		}
		h.mu.Unlock()
		c.sum, c.err = sum, err
		close(c.done)
	}()
	return c
}

// compute hashes the file k names, checking that it is still that version.
func (h *hasher) compute(k hashKey) (string, error) {
	select {
	case h.sem <- struct{}{}:
		defer func() { <-h.sem }()
	case <-h.ctx.Done():
		return "", h.ctx.Err()
	}
	f, err := h.root.Open(k.rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	if info.Size() != k.size || info.ModTime().UnixNano() != k.mtime {
		return "", errChanged
	}
	sum := hub.NewHash(k.kind, k.size)
	n, err := io.Copy(sum, ctxReader{ctx: h.ctx, r: f})
	if err != nil {
		return "", err
	}
	if n != k.size {
		return "", errChanged
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// ctxReader stops a long read when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// lfsSuffixes are the weights files the Hub's default .gitattributes puts in
// LFS whatever their size.
var lfsSuffixes = []string{".safetensors", ".bin", ".gguf", ".pt", ".pth", ".ckpt", ".h5", ".onnx", ".msgpack", ".npy", ".npz", ".parquet", ".arrow", ".zip", ".tar", ".gz"}

// isLFS says whether a plain file is LFS-like.
func (h *Hub) isLFS(f fileEntry) bool {
	if f.size >= h.opts.LFSThreshold {
		return true
	}
	name := strings.ToLower(f.path)
	for _, s := range lfsSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// fileMeta is what the hub says about a file's content.
type fileMeta struct {
	etag string // sha256 (LFS) or git blob sha1
	lfs  bool
	oid  string // git blob sha1 of what git stores: the content, or the LFS pointer
}

// metaStart returns a function yielding f's metadata, having started any
// hashing it needs, so a caller can start many before waiting on any.
func (h *Hub) metaStart(f fileEntry) func(ctx context.Context) (fileMeta, error) {
	if f.etag != "" {
		m := metaFor(f.etag, hub.ETagKind(f.etag) == hub.HashSHA256, f.size)
		return func(context.Context) (fileMeta, error) { return m, nil }
	}
	lfs := h.isLFS(f)
	kind := hub.HashGitSHA1
	if lfs {
		kind = hub.HashSHA256
	}
	c := h.hashes.start(hashKey{rel: f.rel, size: f.size, mtime: f.mtime.UnixNano(), kind: kind})
	return func(ctx context.Context) (fileMeta, error) {
		sum, err := c.wait(ctx)
		if err != nil {
			return fileMeta{}, err
		}
		return metaFor(sum, lfs, f.size), nil
	}
}

// meta returns f's metadata, hashing it if need be.
func (h *Hub) meta(ctx context.Context, f fileEntry) (fileMeta, error) {
	return h.metaStart(f)(ctx)
}

func metaFor(etag string, lfs bool, size int64) fileMeta {
	m := fileMeta{etag: etag, lfs: lfs, oid: etag}
	if lfs {
		m.oid = gitBlobSHA1(lfsPointer(etag, size))
	}
	return m
}

// lfsPointer is the text git-lfs stores in place of the content.
func lfsPointer(sha string, size int64) []byte {
	return fmt.Appendf(nil, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", sha, size)
}

func gitBlobSHA1(p []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(p))
	h.Write(p)
	return hex.EncodeToString(h.Sum(nil))
}
