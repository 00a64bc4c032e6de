// Package resolver turns (repo, revision, path) into the metadata a file
// response needs: the commit, the blob ETag, the size and where upstream keeps
// the bytes. It resolves each file once and reuses the answer (and the signed CDN
// URL inside it) until it expires, because the Hub rate-limits its resolver but
// not its CDN. When upstream is unreachable it falls back to what the cache
// knows, through the huggingface_hub layout itself (refs → snapshots → blobs).
package resolver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/sync/singleflight"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// Upstream is the part of the hub client the resolver needs.
type Upstream interface {
	Resolve(ctx context.Context, auth string, repo hub.Repo, rev, path string) (fetch.FileMeta, error)
	GetRange(ctx context.Context, rawURL, auth string, off, n int64) (io.ReadCloser, error)
}

// Store is the part of the cache the resolver needs for refs and offline fallback.
type Store interface {
	WriteRef(repo hub.Repo, rev, commit string) error
	ReadRef(repo hub.Repo, rev string) (string, error)
	Stat(repo hub.Repo, commit, path string) (cache.File, bool, error)
	PutMeta(key string, data []byte) error
	GetMeta(key string) ([]byte, error)
}

// Options configures a Resolver. Zero values take the documented defaults.
type Options struct {
	// RevisionTTL is how long a branch or tag stays mapped to a commit
	// before upstream is asked again. Default 30s.
	RevisionTTL time.Duration
	// URLTTL bounds how long a resolved file (and its signed CDN URL) is
	// reused for a commit revision. Default 30m; the Hub signs for 1h.
	URLTTL time.Duration
	// AccessTTL bounds how long any caller's resolution (and so upstream's
	// decision that this caller may read this repo) is reused: a revoked
	// token, or a repo turned gated, loses access within it. Default 1m.
	AccessTTL time.Duration
	// Entries bounds the in-memory metadata cache. Default 65536.
	Entries int
	// Observe, when set, is told each access decision upstream made or the
	// proxy made for it: "allowed", "denied" or "unverifiable" (upstream
	// down and the repo not known to be public).
	Observe func(decision string)
	// Offline answers from the cache only and never contacts upstream.
	Offline bool
	Logger  *slog.Logger
}

// Meta is a resolved file.
type Meta struct {
	fetch.FileMeta
	// FromCache is set when upstream could not be asked (offline fallback);
	// DownloadURL is then empty and is resolved on first use.
	FromCache bool
	// Complete is set for a FromCache answer whose blob is fully cached.
	Complete bool
}

// ErrOffline is returned in offline mode for a file the cache does not hold.
var ErrOffline = errors.New("offline mode: file is not cached")

// ErrUnverifiable is returned when upstream cannot be asked and the repo is
// not known to be public: the cache may hold the file, but whether this
// caller may read it cannot be checked, so it is not served (fail closed).
var ErrUnverifiable = errors.New("access to this repo cannot be verified while upstream is unreachable")

// Resolver resolves files through upstream with caching, single-flight and
// offline fallback. It is safe for concurrent use.
type Resolver struct {
	up    Upstream
	store Store
	opts  Options
	log   *slog.Logger

	entries *expirable.LRU[string, entry] // key → resolution; expiry is URLTTL
	group   singleflight.Group

	mu     sync.Mutex
	public map[string]bool // repo → upstream served it anonymously (true) or refused (false); guarded by mu
}

// New returns a Resolver.
func New(up Upstream, store Store, opts Options) *Resolver {
	if opts.RevisionTTL <= 0 {
		opts.RevisionTTL = 30 * time.Second
	}
	if opts.URLTTL <= 0 {
		opts.URLTTL = 30 * time.Minute
	}
	if opts.AccessTTL <= 0 {
		opts.AccessTTL = time.Minute
	}
	if opts.Entries <= 0 {
		opts.Entries = 65536
	}
	if opts.Observe == nil {
		opts.Observe = func(string) {}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Resolver{
		up:      up,
		store:   store,
		opts:    opts,
		log:     log,
		entries: expirable.NewLRU[string, entry](opts.Entries, nil, opts.URLTTL),
		public:  make(map[string]bool),
	}
}

// RevisionTTL is the effective branch/tag TTL, defaults applied.
func (r *Resolver) RevisionTTL() time.Duration { return r.opts.RevisionTTL }

// key identifies one resolution. It includes a hash of the caller's
// credentials: what upstream answers (and whether it answers at all) depends on
// who asks, so one caller's answer is never reused for another. Raw tokens are
// never kept.
func key(auth string, repo hub.Repo, rev, path string) string {
	h := sha256.Sum256([]byte(auth))
	return hex.EncodeToString(h[:8]) + "\x00" + repo.String() + "\x00" + rev + "\x00" + path
}

// File resolves repo@rev:path. A branch or tag is re-resolved after
// RevisionTTL; a commit after URLTTL. On an upstream outage (or in offline
// mode) it answers from the cache, and if the cache has nothing it returns
// the upstream's error (or ErrOffline).
func (r *Resolver) File(ctx context.Context, auth string, repo hub.Repo, rev, path string) (Meta, error) {
	if r.opts.Offline {
		return r.fromCache(repo, rev, path, ErrOffline)
	}
	k := key(auth, repo, rev, path)
	if m, ok := r.lookup(k, auth, rev); ok {
		return Meta{FileMeta: m}, nil
	}
	ch := r.group.DoChan(k, func() (any, error) {
		// The flight outlives any one caller: it is shared, so it runs on a
		// context that no single disconnecting client can cancel.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		m, err := r.up.Resolve(fctx, auth, repo, rev, path)
		r.decided(auth, repo, err)
		if err != nil {
			return nil, err
		}
		r.entries.Add(k, entry{meta: m, at: time.Now()})
		r.recordRef(repo, rev, m.Commit)
		return m, nil
	})
	select {
	case <-ctx.Done():
		return Meta{}, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			if errors.Is(res.Err, fetch.ErrUnavailable) {
				r.log.Warn("upstream unavailable, answering from cache", "repo", repo.String(), "rev", rev, "err", res.Err)
				return r.fromCache(repo, rev, path, res.Err)
			}
			return Meta{}, res.Err
		}
		return Meta{FileMeta: res.Val.(fetch.FileMeta)}, nil
	}
}

// Invalidate forgets a resolution, e.g. after its signed URL expired.
func (r *Resolver) Invalidate(auth string, repo hub.Repo, rev, path string) {
	r.entries.Remove(key(auth, repo, rev, path))
}

// entry is one cached resolution with the time it was made, so that branch
// and tag answers expire after RevisionTTL while the LRU's own TTL (URLTTL)
// bounds every entry, commits included.
type entry struct {
	meta fetch.FileMeta
	at   time.Time
}

func (r *Resolver) lookup(k, auth, rev string) (fetch.FileMeta, bool) {
	e, ok := r.entries.Get(k)
	if !ok {
		return fetch.FileMeta{}, false
	}
	age := time.Since(e.at)
	// Every answer, an anonymous one too, is an access decision: a repo can
	// turn gated or private, and the proxy token must not keep fetching its
	// bytes for callers upstream now refuses.
	if !hub.IsCommit(rev) && age > r.opts.RevisionTTL || age > r.opts.AccessTTL {
		return fetch.FileMeta{}, false
	}
	return e.meta, true
}

// AccessTTL is the effective per-caller decision TTL, defaults applied.
func (r *Resolver) AccessTTL() time.Duration { return r.opts.AccessTTL }

func (r *Resolver) recordRef(repo hub.Repo, rev, commit string) {
	if hub.IsCommit(rev) || !hub.IsCommit(commit) {
		return
	}
	// Compare with the disk, not memory: the API path writes refs too.
	if cur, err := r.store.ReadRef(repo, rev); err == nil && cur == commit {
		return
	}
	if err := r.store.WriteRef(repo, rev, commit); err != nil {
		r.log.Warn("writing ref", "repo", repo.String(), "rev", rev, "err", err)
	}
}

// decided records what upstream said about a caller and a repo. An anonymous
// success proves the repo public; an anonymous refusal proves it is not. Only
// a token's hash prefix is ever logged.
func (r *Resolver) decided(auth string, repo hub.Repo, err error) {
	var se *fetch.StatusError
	denied := errors.As(err, &se) && (se.Code == 401 || se.Code == 403 ||
		se.Code == 404 && (se.ErrorCode == "RepoNotFound" || se.ErrorCode == "GatedRepo"))
	switch {
	case err == nil:
		r.opts.Observe("allowed")
		if auth == "" {
			r.setPublic(repo, true)
		}
	case denied:
		r.opts.Observe("denied")
		r.log.Info("access denied upstream", "repo", repo.String(), "caller", callerID(auth), "status", se.Code, "code", se.ErrorCode)
		if auth == "" {
			r.setPublic(repo, false)
		}
	}
}

// callerID names a caller in logs without revealing its credentials.
func callerID(auth string) string {
	if auth == "" {
		return "anonymous"
	}
	h := sha256.Sum256([]byte(auth))
	return "token:" + hex.EncodeToString(h[:4])
}

func publicKey(repo hub.Repo) string { return "public\x00" + repo.String() }

func (r *Resolver) setPublic(repo hub.Repo, public bool) {
	was := r.Public(repo) // loads what the disk says first
	r.mu.Lock()
	r.public[repo.String()] = public
	r.mu.Unlock()
	if was == public {
		// Nothing to persist; in particular a refusal for a repo never
		// seen public writes nothing, so probing names cannot fill the disk.
		return
	}
	v := []byte("0")
	if public {
		v = []byte("1")
	}
	if err := r.store.PutMeta(publicKey(repo), v); err != nil {
		r.log.Warn("recording repo visibility", "repo", repo.String(), "err", err)
	}
}

// Public reports whether upstream last served repo to an anonymous caller.
// The answer survives restarts; a repo never seen anonymously is not public.
func (r *Resolver) Public(repo hub.Repo) bool {
	r.mu.Lock()
	p, ok := r.public[repo.String()]
	r.mu.Unlock()
	if ok {
		return p
	}
	b, err := r.store.GetMeta(publicKey(repo))
	p = err == nil && string(b) == "1"
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.public[repo.String()]; ok {
		return cur // an answer from upstream arrived meanwhile: it wins
	}
	r.public[repo.String()] = p
	return p
}

// fromCache answers from the cache layout: the revision maps to a commit
// through refs/ (or is one), and the commit's snapshot names the blob.
func (r *Resolver) fromCache(repo hub.Repo, rev, path string, cause error) (Meta, error) {
	if !r.Public(repo) {
		// Gated, private or never seen anonymously: nobody's access can be
		// checked without upstream, so nobody is served (fail closed).
		r.opts.Observe("unverifiable")
		return Meta{}, fmt.Errorf("%w (%v)", ErrUnverifiable, cause)
	}
	commit := rev
	if !hub.IsCommit(rev) {
		c, err := r.store.ReadRef(repo, rev)
		if err != nil {
			return Meta{}, cause
		}
		commit = c
	}
	f, complete, err := r.store.Stat(repo, commit, path)
	if err != nil {
		return Meta{}, cause
	}
	return Meta{
		FileMeta:  fetch.FileMeta{Commit: f.Commit, ETag: f.ETag, Size: f.Size},
		FromCache: true,
		Complete:  complete,
	}, nil
}
