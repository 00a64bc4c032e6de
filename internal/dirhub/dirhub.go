// Package dirhub serves a local directory of model repositories as a
// hub-compatible upstream, so hubproxy can run on air-gapped clusters and be
// tried without internet (hubproxy serve --upstream dir:PATH, hubproxy demo).
//
// Two layouts are recognised under the root, per repository:
//
//	<root>/models--ns--name/…              an HF_HUB_CACHE repo (snapshots/, blobs/, refs/)
//	<root>/ns/name/…                       a plain folder: a model repo's files
//	<root>/name/…                          a plain folder for a one-segment id (gpt2),
//	                                       if it holds a regular file at its top level
//	<root>/datasets/ns/name/…              a plain dataset repo (spaces/ likewise)
//
// A repo in the HF_HUB_CACHE layout wins over a plain folder of the same id.
// It answers exactly what hubproxy's upstream client and hub clients need
// (docs/hub-protocol.md): HEAD/GET on /resolve/ and /raw/ with a 200 (never a
// redirect), X-Repo-Commit, an ETag that names the content (sha256 for
// LFS-like files, git blob sha1 otherwise) plus X-Linked-Etag/X-Linked-Size
// for LFS-like ones, ranges through http.ServeContent; the repo info, tree and
// paths-info APIs; and the hub's error codes.
//
// # Commits and ETags
//
// A plain folder has no history: its commit is a pseudo-commit, the sha1 of
// its file list with sizes and modification times, so it changes whenever a
// file does, and only "main", "HEAD" and that commit resolve. An HF cache
// repo has real commits (snapshots/<commit>) and refs/<rev>.
//
// In an HF cache the blob name a snapshot link points at is the ETag; nothing
// is hashed. A plain folder's files are hashed on first use (sha256 for files
// of at least Options.LFSThreshold bytes or with a weights suffix, git sha1
// for the rest) and the result kept in memory, keyed by path, size and
// modification time. Hashing runs detached from the request that asked for it
// (a client that gives up does not waste the work), at most HashWorkers at a
// time, until Close. A multi-GB file therefore makes its first HEAD slow; for
// very large models prefer the HF_HUB_CACHE layout, which needs no hashing.
//
// # Safety
//
// Every file is opened through an os.Root: nothing outside the root is ever
// read. Symlinks are followed only while they stay inside the root (an HF
// cache's ../../blobs links do), and must be relative. Only regular files are
// served; directories reached through symlinks are not descended into, and
// .git directories and a top-level .cache are skipped.
package dirhub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Options configure a Hub. Zero values select the defaults.
type Options struct {
	// LFSThreshold is the size from which a plain file is LFS-like (ETag
	// sha256, X-Linked-* headers); default 1 MiB, as the Hub's usual
	// .gitattributes. Weights suffixes (.safetensors, .bin, …) always are.
	LFSThreshold int64
	// HashWorkers bounds concurrent file hashing; default 2.
	HashWorkers int
	// HashCacheEntries bounds the in-memory hash cache; default 65536.
	HashCacheEntries int
	// Logger receives debug notes about skipped files; nil discards.
	Logger *slog.Logger
}

// Defaults for zero-valued Options fields.
const (
	DefaultLFSThreshold     = 1 << 20
	DefaultHashWorkers      = 2
	DefaultHashCacheEntries = 1 << 16
)

// Hub serves a directory as a hub. It is an http.Handler, safe for
// concurrent use. Close stops hashing in flight and releases the root.
type Hub struct {
	root   *os.Root
	dir    string
	opts   Options
	log    *slog.Logger
	hashes *hasher
	cancel context.CancelFunc

	closeOnce sync.Once
}

// New opens root and returns a Hub serving it. The directory must exist; it
// is read, never written.
func New(root string, opts Options) (*Hub, error) {
	if opts.LFSThreshold < 0 || opts.HashWorkers < 0 || opts.HashCacheEntries < 0 {
		return nil, errors.New("dirhub: negative option")
	}
	if opts.LFSThreshold == 0 {
		opts.LFSThreshold = DefaultLFSThreshold
	}
	if opts.HashWorkers == 0 {
		opts.HashWorkers = DefaultHashWorkers
	}
	if opts.HashCacheEntries == 0 {
		opts.HashCacheEntries = DefaultHashCacheEntries
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	info, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("dirhub: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("dirhub: %s is not a directory", root)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("dirhub: %w", err)
	}
	done, err := lru.New[hashKey, string](opts.HashCacheEntries)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("dirhub: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{root: r, dir: root, opts: opts, log: opts.Logger, cancel: cancel}
	h.hashes = &hasher{
		ctx:  ctx,
		root: r,
		sem:  make(chan struct{}, opts.HashWorkers),
		done: done,
	}
	return h, nil
}

// Close cancels hashing in flight, waits for it, and closes the root.
// Requests still being served fail. Close is idempotent.
func (h *Hub) Close() error {
	var err error
	h.closeOnce.Do(func() {
		// Under the hasher's lock, so no hash starts after the cancel
		// and escapes the Wait.
		h.hashes.mu.Lock()
		h.cancel()
		h.hashes.mu.Unlock()
		h.hashes.wg.Wait()
		err = h.root.Close()
	})
	return err
}

// ServeHTTP routes a request to the file or API handlers.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, herr := parseRoute(r.URL.EscapedPath())
	if herr != nil {
		writeError(w, r, herr)
		return
	}
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case rt.kind == routePathsInfo && r.Method == http.MethodPost:
		h.servePathsInfo(w, r, rt)
	case !get:
		writeError(w, r, &hubError{status: http.StatusMethodNotAllowed, msg: "Method not allowed"})
	case rt.kind == routeFile:
		h.serveFile(w, r, rt)
	case rt.kind == routeInfo:
		h.serveInfo(w, r, rt)
	case rt.kind == routeTree:
		h.serveTree(w, r, rt)
	default:
		// paths-info needs POST; xet-read-token is never offered.
		writeError(w, r, errNoRoute())
	}
}

// URL is the upstream URL to pair with inproc.Transport(hub) (hubproxy's
// Upstream for a dir: upstream). Its host is never resolved.
const URL = "http://dirhub.local"
