// Package repofs is the one way to open a file of a hub repo for a caller.
// Open resolves the file (upstream's access decision for that caller
// included, or the access policy when upstream cannot be asked), opens it in
// the cache, which fills it lazily from upstream by ranged GETs pinned to the
// resolved commit, and carries on straight from upstream when the cache
// cannot store it (a full disk, an ETag that names no content hash). The
// file routes, the tensor API and GPU staging all read repo files through
// it, so none of them glues resolver, origin and cache together again.
//
// A cold ranged GET goes: server (route) → repofs.Open → resolver.File
// (HEAD upstream, once per caller and file) → cache.Store.Open → File.ReadAt
// → cache.Handle.ReadAt → fill → origin.FetchRange → fetch.GetRange (CDN),
// and back; nothing returns to the server in between.
package repofs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// Resolver is the part of the resolver repofs needs: a file's metadata for
// a caller, and forgetting it when its download URL was refused.
type Resolver interface {
	File(ctx context.Context, c hub.Caller, f hub.FileRef) (resolver.Meta, error)
	Invalidate(c hub.Caller, f hub.FileRef)
}

// Store is the part of the cache repofs needs.
type Store interface {
	Open(ctx context.Context, f cache.File, o cache.Origin) (*cache.Handle, error)
}

// Upstream fetches byte ranges of a resolved file: one range, or several
// in one multipart/byteranges request (an error matching
// fetch.ErrNotMultipart when the upstream answers that otherwise).
type Upstream interface {
	GetRange(ctx context.Context, rawURL, auth string, want fetch.Want, off, n int64) (io.ReadCloser, error)
	GetRanges(ctx context.Context, rawURL, auth string, want fetch.Want, ranges []fetch.Range) (io.ReadCloser, error)
}

// Options configures an FS.
type Options struct {
	// OnBypass, when set, is told once per opened file that the cache could
	// not store its bytes and reads now stream from upstream.
	OnBypass func(ctx context.Context, repo hub.Repo, path string, err error)
	// Share, when set, makes a file's fills shared with other nodes
	// (internal/sharedfill): the origin it returns reads what another node
	// already fetched from a shared store, and fetches the rest through up
	// once for the cluster. It is given only files whose access upstream
	// has decided for this caller (Open resolved them first), and keys what
	// it shares by etag, a content hash, so sharing never widens who may
	// read what.
	Share  func(etag string, size int64, up cache.Origin) cache.Origin
	Logger *slog.Logger
}

// FS opens repo files. It is safe for concurrent use.
type FS struct {
	res   Resolver
	store Store
	up    Upstream
	opts  Options
	log   *slog.Logger

	verdicts hostVerdicts // what download hosts did with multi-range requests
}

// New returns an FS over the resolver, the cache and the upstream client.
func New(res Resolver, store Store, up Upstream, opts Options) *FS {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FS{res: res, store: store, up: up, opts: opts, log: log,
		verdicts: hostVerdicts{multi: map[string]bool{}, refusals: map[string]time.Time{}}}
}

// Stat resolves f for caller c without opening it: what a HEAD needs.
func (fs *FS) Stat(ctx context.Context, c hub.Caller, f hub.FileRef) (resolver.Meta, error) {
	return fs.res.File(ctx, c, f)
}

// Open resolves f for caller c and opens it for reading. The
// File's reads honour ctx; fills they start outlive it. Errors wrap what
// failed: the resolver's (a *fetch.StatusError for upstream's refusals and
// missing files, ErrUnverifiable, ErrOffline) or the cache's.
func (fs *FS) Open(ctx context.Context, c hub.Caller, ref hub.FileRef) (*File, error) {
	m, err := fs.res.File(ctx, c, ref)
	if err != nil {
		return nil, err
	}
	f := &File{
		fs:     fs,
		ctx:    ctx,
		Repo:   ref.Repo,
		Path:   ref.Path,
		Meta:   m,
		origin: &origin{fs: fs, caller: c, at: ref.At(m.Commit), etag: m.ETag, size: m.Size, url: m.DownloadURL},
	}
	f.stream.end = m.Size
	if hub.ETagKind(m.ETag) == hub.HashUnknown {
		// No content hash to store it under or verify it by: every read
		// streams from upstream, uncached.
		f.bypassing.Store(true)
		return f, nil
	}
	h, err := fs.store.Open(ctx, cache.File{Repo: ref.Repo, Commit: m.Commit, Path: ref.Path, ETag: m.ETag, Size: m.Size}, fs.fillOrigin(f.origin))
	if err != nil {
		return nil, fmt.Errorf("opening %s in the cache: %w", ref.Path, err)
	}
	f.h = h
	return f, nil
}
