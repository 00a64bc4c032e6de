package dirhub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

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
	ctx   context.Context // cancelled by Hub.Close
	root  *os.Root
	sem   chan struct{} // HashWorkers tokens
	done  *lru.Cache[hashKey, string]
	group singleflight.Group
	wg    sync.WaitGroup // flights running; Add only under mu while ctx lives

	mu sync.Mutex // orders wg.Add against Close's cancel and Wait
}

// hashCall is one hash asked for: its result arrives on ch.
type hashCall struct {
	ch <-chan singleflight.Result
}

// wait returns the hash, or ctx's error if ctx ends first.
func (c hashCall) wait(ctx context.Context) (string, error) {
	select {
	case r := <-c.ch:
		if r.Err != nil {
			return "", r.Err
		}
		return r.Val.(string), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// start returns the call computing k: a cached result, the flight already
// computing it, or a new flight.
func (h *hasher) start(k hashKey) hashCall {
	if sum, ok := h.done.Get(k); ok {
		ch := make(chan singleflight.Result, 1)
		ch <- singleflight.Result{Val: sum}
		return hashCall{ch: ch}
	}
	key := fmt.Sprintf("%d\x00%d\x00%d\x00%s", k.kind, k.size, k.mtime, k.rel)
	return hashCall{ch: h.group.DoChan(key, func() (any, error) {
		h.mu.Lock()
		if err := h.ctx.Err(); err != nil {
			h.mu.Unlock()
			return nil, err
		}
		h.wg.Add(1)
		h.mu.Unlock()
		defer h.wg.Done()
		sum, err := h.compute(k)
		if err != nil {
			return nil, err
		}
		h.done.Add(k, sum)
		return sum, nil
	})}
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
	sum, err := hub.HashContent(h.ctx, f, k.kind, k.size)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "", errChanged
	}
	if err != nil {
		return "", err
	}
	// A file written to while it was hashed has no one hash: ask again.
	if after, err := f.Stat(); err != nil || after.Size() != k.size || after.ModTime().UnixNano() != k.mtime {
		return "", errChanged
	}
	return sum, nil
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
		m.oid = hub.GitBlobSHA1(hub.LFSPointer(etag, size))
	}
	return m
}
