// Package resolver turns (repo, revision, path) into the metadata a file
// response needs: the commit, the blob ETag, the size and where upstream keeps
// the bytes. It resolves each file once and reuses the answer (and the signed CDN
// URL inside it) until it expires, because the Hub rate-limits its resolver but
// not its CDN. It also owns the access policy (policy.go): what upstream said
// about who may read what, which decides whether an answer may be given
// without asking upstream, for example while upstream is unreachable, when it
// falls back to what the cache knows through the huggingface_hub layout itself
// (refs → snapshots → blobs, and .no_exist for files that are not there).
package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// Upstream is the part of the hub client the resolver needs.
type Upstream interface {
	Resolve(ctx context.Context, auth string, f hub.FileRef) (fetch.FileMeta, error)
	Visibility(ctx context.Context, repo hub.Repo) (fetch.Visibility, error)
}

// Store is the part of the cache the resolver needs for refs, missing-file
// markers, the offline fallback and the access policy's records.
type Store interface {
	WriteRef(repo hub.Repo, rev, commit string) error
	ReadRef(repo hub.Repo, rev string) (string, error)
	Stat(repo hub.Repo, commit, path string) (cache.File, bool, error)
	WriteNoExist(repo hub.Repo, commit, path string) error
	NoExist(repo hub.Repo, commit, path string) bool
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
	// PublicTTL bounds how long upstream's word that a repo, or a file at a
	// commit, is readable by anyone is trusted while upstream cannot be
	// asked. Default 24h.
	PublicTTL time.Duration
	// OutageGrace, when longer than AccessTTL, lets a caller whose own
	// credential upstream granted a repo within it keep reading that repo's
	// cached files while upstream is unavailable. Default 0 (off): gated and
	// private content then fails closed once AccessTTL has passed.
	OutageGrace time.Duration
	// Entries bounds the in-memory metadata cache. Default 65536.
	Entries int
	// Observe, when set, is told each access decision upstream made or the
	// proxy made for it: "allowed", "denied" or "unverifiable" (upstream
	// down and nothing it said covers the caller).
	Observe func(decision string)
	// Offline answers from the cache only and never contacts upstream.
	Offline bool
	// Now is the clock; nil means time.Now. Tests inject their own.
	Now    func() time.Time
	Logger *slog.Logger
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

// ErrUnverifiable is returned when upstream cannot be asked and nothing it
// said covers this caller: the cache may hold the file, but whether this
// caller may read it cannot be checked, so it is not served (fail closed).
var ErrUnverifiable = errors.New("access to this repo cannot be verified while upstream is unreachable")

// Resolver resolves files through upstream with caching, single-flight and
// offline fallback. It is safe for concurrent use; Close flushes what the
// access policy learnt.
type Resolver struct {
	up     Upstream
	store  Store
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	policy *policy

	entries *lru.Cache[string, entry] // key → resolution
	group   singleflight.Group        // resolutions in flight, by key
	probes  singleflight.Group        // visibility probes in flight, by repo

	refsMu sync.Mutex
	refs   map[refKey]refEntry // branch/tag → commit as last resolved; guarded by refsMu

	stop      chan struct{} // closed by Close: ends the flusher
	flushDone chan struct{} // closed when the flusher has returned
	closeOnce sync.Once
}

type refKey struct {
	repo hub.Repo
	rev  string
}

type refEntry struct {
	commit string
	at     time.Time
}

// flushEvery is how often the access policy's changes are persisted.
const flushEvery = time.Second

// New returns a Resolver. Call Close when done with it.
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
	if opts.PublicTTL <= 0 {
		opts.PublicTTL = 24 * time.Hour
	}
	if opts.Entries <= 0 {
		opts.Entries = 65536
	}
	if opts.Observe == nil {
		opts.Observe = func(string) {}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	entries, _ := lru.New[string, entry](opts.Entries)
	r := &Resolver{
		up:        up,
		store:     store,
		opts:      opts,
		log:       log,
		now:       opts.Now,
		policy:    newPolicy(store, opts.Now, opts.AccessTTL, opts.PublicTTL, opts.OutageGrace, log),
		entries:   entries,
		refs:      make(map[refKey]refEntry),
		stop:      make(chan struct{}),
		flushDone: make(chan struct{}),
	}
	go r.flusher()
	return r
}

// Close persists the access policy's records and stops the flusher. It is
// idempotent.
func (r *Resolver) Close() error {
	r.closeOnce.Do(func() { close(r.stop) })
	<-r.flushDone
	return r.policy.flush()
}

func (r *Resolver) flusher() {
	defer close(r.flushDone)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if err := r.policy.flush(); err != nil {
				r.log.Warn("persisting access records", "err", err)
			}
		}
	}
}

// key identifies one resolution by caller, repo, revision and path: what
// upstream answers (and whether it answers at all) depends on who asks, so
// one caller's answer is never reused for another. It holds the caller's
// ID, never its credential.
func key(c hub.Caller, f hub.FileRef) string {
	return c.ID() + "\x00" + f.Repo.String() + "\x00" + f.Rev + "\x00" + f.Path
}

// File resolves f for caller c, asking upstream with c's credential. A
// branch or tag is re-resolved after RevisionTTL; a commit after URLTTL; any
// answer after AccessTTL. A file upstream said is missing at a commit is
// answered from the cache's .no_exist markers to callers with a live access
// decision. On an upstream outage (or in offline mode) it answers from the
// cache as the access policy allows, and if the cache has nothing it returns
// the upstream's error (or ErrOffline).
func (r *Resolver) File(ctx context.Context, c hub.Caller, f hub.FileRef) (Meta, error) {
	if r.opts.Offline {
		return r.fromCache(c, f, ErrOffline)
	}
	k := key(c, f)
	if m, ok := r.lookup(k, f.Rev); ok {
		return Meta{FileMeta: m}, nil
	}
	if err := r.knownMissing(c, f); err != nil {
		return Meta{}, err
	}
	ch := r.group.DoChan(k, func() (any, error) {
		// A caller that missed the cache just as a flight for k ended
		// starts a new one: look again inside the flight, so it reuses
		// what that flight stored instead of asking upstream twice.
		if m, ok := r.lookup(k, f.Rev); ok {
			return m, nil
		}
		// The flight outlives any one caller: it is shared, so it runs on a
		// context that no single disconnecting client can cancel.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		// A credential's success says nothing of whether the repo is public,
		// so ask upstream anonymously, alongside: it decides who may read
		// the repo's cached files during an outage.
		var probe <-chan singleflight.Result
		if !c.Anonymous() {
			probe = r.probeVisibility(fctx, f.Repo)
		}
		m, err := r.up.Resolve(fctx, c.Auth(), f)
		r.learn(c, f, m, err)
		if probe != nil {
			<-probe
		}
		if err != nil {
			return nil, err
		}
		now := r.now()
		r.entries.Add(k, entry{meta: m, at: now})
		if !hub.IsCommit(f.Rev) && hub.IsCommit(m.Commit) {
			// The answer for a branch is the answer for the commit it
			// resolved to (the download URL is pinned to it): what opens
			// the file next at that commit, as the tensor path and fills
			// do, reuses it instead of asking upstream again.
			r.entries.Add(key(c, f.At(m.Commit)), entry{meta: m, at: now})
		}
		return m, nil
	})
	select {
	case <-ctx.Done():
		return Meta{}, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			if errors.Is(res.Err, fetch.ErrUnavailable) {
				r.log.Debug("upstream unavailable, answering from cache", "repo", f.Repo.String(), "rev", f.Rev, "err", res.Err)
				return r.fromCache(c, f, res.Err)
			}
			return Meta{}, res.Err
		}
		return Meta{FileMeta: res.Val.(fetch.FileMeta)}, nil
	}
}

// Invalidate forgets c's resolution of f, e.g. after its signed URL
// expired.
func (r *Resolver) Invalidate(c hub.Caller, f hub.FileRef) {
	r.entries.Remove(key(c, f))
}

// entry is one cached resolution with the time it was made.
type entry struct {
	meta fetch.FileMeta
	at   time.Time
}

// lookup returns a cached resolution that may still be used: any is at most
// AccessTTL and URLTTL old (every answer, an anonymous one too, is an access
// decision: a repo can turn gated or private, and the proxy token must not
// keep fetching its bytes for callers upstream now refuses), and a branch's
// or tag's at most RevisionTTL.
func (r *Resolver) lookup(k, rev string) (fetch.FileMeta, bool) {
	e, ok := r.entries.Get(k)
	if !ok {
		return fetch.FileMeta{}, false
	}
	if !r.Reusable(rev, e.at) || r.now().Sub(e.at) > r.opts.URLTTL {
		return fetch.FileMeta{}, false
	}
	return e.meta, true
}

// learn records what upstream answered a resolution: the access decision,
// the ref, and a missing file's marker.
func (r *Resolver) learn(c hub.Caller, f hub.FileRef, m fetch.FileMeta, err error) {
	r.answeredFile(c, f.Repo, err)
	commit := m.Commit
	var se *fetch.StatusError
	switch {
	case err == nil:
	case errors.As(err, &se) && se.Code == http.StatusNotFound && se.ErrorCode == "EntryNotFound" && hub.IsCommit(se.RepoCommit):
		commit = se.RepoCommit
		if err := r.store.WriteNoExist(f.Repo, commit, f.Path); err != nil {
			r.log.Warn("recording a missing file", "repo", f.Repo.String(), "path", f.Path, "err", err)
		}
	default:
		return
	}
	r.recordRef(f.Repo, f.Rev, commit)
	if c.Anonymous() {
		r.policy.servedAnonymously(f.Repo, commit, f.Path)
	}
}

// knownMissing answers EntryNotFound for a file the cache recorded missing
// at the commit rev names, to a caller who may have answers about the
// repo's files: its own file grant, or the repo's public visibility, is
// fresh; for an anonymous caller, also upstream's own anonymous answer about
// that very path. A metadata answer is not enough: the Hub serves a gated
// repo's metadata to anyone, and its files' existence only to callers it
// admits.
func (r *Resolver) knownMissing(c hub.Caller, f hub.FileRef) error {
	commit := f.Rev
	if !hub.IsCommit(f.Rev) {
		if commit = r.freshRef(f.Repo, f.Rev); commit == "" {
			return nil
		}
	}
	if !r.store.NoExist(f.Repo, commit, f.Path) {
		return nil
	}
	if !r.policy.live(c, f.Repo) && (!c.Anonymous() || !r.policy.liveAnonymous(f.Repo, commit, f.Path)) {
		return nil
	}
	return missing(commit)
}

// missing is the hub's answer for a file that is not at commit.
func missing(commit string) error {
	return &fetch.StatusError{Code: http.StatusNotFound, ErrorCode: "EntryNotFound", Message: "Entry not found", RepoCommit: commit}
}

// recordRef remembers (in memory, with its time) and persists (refs/<rev>)
// the commit a branch or tag resolved to.
func (r *Resolver) recordRef(repo hub.Repo, rev, commit string) {
	if hub.IsCommit(rev) || !hub.IsCommit(commit) {
		return
	}
	r.refsMu.Lock()
	r.refs[refKey{repo, rev}] = refEntry{commit: commit, at: r.now()}
	r.refsMu.Unlock()
	// Compare with the disk, not memory: the API path writes refs too.
	if cur, err := r.store.ReadRef(repo, rev); err == nil && cur == commit {
		return
	}
	if err := r.store.WriteRef(repo, rev, commit); err != nil {
		r.log.Warn("writing ref", "repo", repo.String(), "rev", rev, "err", err)
	}
}

// freshRef is the commit rev resolved to within RevisionTTL, or "".
func (r *Resolver) freshRef(repo hub.Repo, rev string) string {
	r.refsMu.Lock()
	defer r.refsMu.Unlock()
	e, ok := r.refs[refKey{repo, rev}]
	if !ok || r.now().Sub(e.at) > r.opts.RevisionTTL {
		return ""
	}
	return e.commit
}

// fromCache answers from the cache layout, as far as the access policy lets
// the caller have answers without upstream: the revision maps to a commit
// through refs/ (or is one), and the commit's snapshot names the blob, or its
// .no_exist marker says the file is not there.
func (r *Resolver) fromCache(c hub.Caller, f hub.FileRef, cause error) (Meta, error) {
	commit := f.Rev
	if !hub.IsCommit(f.Rev) {
		ref, err := r.store.ReadRef(f.Repo, f.Rev)
		if err != nil {
			// Nothing cached at this revision. Say so only to a caller who
			// could have had it: to anyone else, a repo the proxy never saw
			// and a private one it serves must look the same.
			if _, err := r.policy.fallback(c, f.Repo, time.Time{}); err != nil {
				r.opts.Observe("unverifiable")
				return Meta{}, fmt.Errorf("%w (%v)", ErrUnverifiable, cause)
			}
			return Meta{}, cause
		}
		commit = ref
	}
	why, err := r.policy.fallback(c, f.Repo, r.policy.anonymousAt(f.Repo, commit, f.Path))
	if err != nil {
		r.opts.Observe("unverifiable")
		return Meta{}, fmt.Errorf("%w (%v)", ErrUnverifiable, cause)
	}
	cf, complete, err := r.store.Stat(f.Repo, commit, f.Path)
	if err != nil {
		if r.store.NoExist(f.Repo, commit, f.Path) {
			return Meta{}, missing(commit)
		}
		return Meta{}, cause
	}
	r.log.Debug("answering from the cache without upstream", "repo", f.Repo.String(), "path", f.Path, "caller", c, "because", string(why))
	return Meta{
		FileMeta:  fetch.FileMeta{Commit: cf.Commit, ETag: cf.ETag, Size: cf.Size},
		FromCache: true,
		Complete:  complete,
	}, nil
}
