package resolver

import (
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// The access policy: the one rule for "may this caller have this answer
// without asking upstream". Upstream decides every caller's access; the proxy
// only remembers what upstream said, and when (docs/hub-protocol.md §9 has
// the Hub's rules this rests on):
//
//   - a caller's file grant: upstream answered this credential's resolve of
//     one of the repo's files with the file's metadata. The Hub gates a
//     repo's content as a whole, so it lets the caller reuse answers about
//     the repo's files for access-ttl, and during an outage for
//     max(access-ttl, outage-grace). Nothing else is a file grant: not an
//     EntryNotFound or RevisionNotFound, and above all not a metadata
//     answer, since the Hub serves a gated repo's info, tree and paths-info
//     to anyone. Anonymous callers get none (they all share one identity):
//     what they may have is recorded per file, below.
//   - a caller's metadata grant: upstream answered this credential's repo
//     info, tree or paths-info. It lets the caller have cached metadata
//     answers during an outage, and nothing more.
//   - what upstream served anonymously: per file and commit (its bytes, or
//     that it is missing). During an outage anyone may have such a file from
//     the cache, unless upstream has said since that the repo is not public.
//   - the repo's visibility: from hubproxy's own anonymous, unprojected
//     repo-info probe (never from a client's request, whose expand= may
//     leave fields out), and from refusals (GatedRepo, RepoNotFound, an
//     anonymous 401), which only ever make it not public. A public repo's
//     cached files may be served to anyone during an outage.
//
// A refusal of a credential erases both its grants. Outage beliefs
// (anonymous files, visibility) are trusted for PublicTTL. Everything is
// persisted (write-behind, once a second), so a restart during an outage
// keeps what was learnt; a crash loses at most a second of it, which only
// ever fails closed.
type policy struct {
	// Immutable after newPolicy.
	store                       Store
	now                         func() time.Time
	accessTTL, publicTTL, grace time.Duration
	log                         *slog.Logger

	mu sync.Mutex
	// Guarded by mu.
	repos    *lru.Cache[hub.Repo, *repoRecord] // loaded records, most recently used kept
	dirty    map[hub.Repo]*repoRecord          // changed since the last flush; kept even if evicted from repos
	flushing map[hub.Repo]*repoRecord          // being written by flush: still the truth until written
}

// repoRecord is what the policy knows of one repo. Its JSON form is the
// persisted document. File grants are stored under a key older versions did
// not write: their "grants" also counted metadata answers, so they are
// dropped on upgrade rather than trusted (failing closed).
type repoRecord struct {
	Visibility *belief              `json:"visibility,omitempty"`
	Anonymous  map[string]time.Time `json:"anonymous,omitempty"`   // "commit/path" → last anonymous answer
	Files      map[string]time.Time `json:"file_grants,omitempty"` // hub.Caller.ID → last file grant
	Meta       map[string]time.Time `json:"meta_grants,omitempty"` // hub.Caller.ID → last metadata answer
}

// belief is upstream's word on whether a repo is public, and when it said so.
type belief struct {
	Public bool      `json:"public"`
	At     time.Time `json:"at"`
}

// Bounds on a record, so that callers varying tokens or paths cannot grow
// memory or the meta directory without limit: the oldest entries go first.
const (
	maxAnonymousPerRepo = 8192
	maxGrantsPerRepo    = 1024
	maxRecords          = 4096
)

func newPolicy(store Store, now func() time.Time, accessTTL, publicTTL, grace time.Duration, log *slog.Logger) *policy {
	c, _ := lru.New[hub.Repo, *repoRecord](maxRecords)
	return &policy{store: store, now: now, accessTTL: accessTTL, publicTTL: publicTTL, grace: grace, log: log,
		repos: c, dirty: make(map[hub.Repo]*repoRecord), flushing: make(map[hub.Repo]*repoRecord)}
}

func policyKey(repo hub.Repo) string { return "policy\x00" + repo.String() }

// recordLocked returns repo's record, loading it from the store on first use.
// Records are per repo as the Hub knows it, whatever casing a caller used
// (hub.Repo.Folded): a refusal or a "not private" learnt through one casing
// holds for every other. Records an older version kept under another casing
// are not found, which fails closed.
func (p *policy) recordLocked(repo hub.Repo) *repoRecord {
	repo = repo.Folded()
	if rec, ok := p.dirty[repo]; ok {
		return rec
	}
	// A record evicted from repos while flush writes it must not be read
	// back from the store as it was before: that could lose a "not public"
	// belief or a refusal.
	if rec, ok := p.flushing[repo]; ok {
		p.repos.Add(repo, rec)
		return rec
	}
	if rec, ok := p.repos.Get(repo); ok {
		return rec
	}
	rec := &repoRecord{}
	if b, err := p.store.GetMeta(policyKey(repo)); err == nil {
		if err := json.Unmarshal(b, rec); err != nil {
			p.log.Warn("discarding an unreadable access record", "repo", repo.String(), "err", err)
			rec = &repoRecord{}
		}
	}
	p.repos.Add(repo, rec)
	return rec
}

func (p *policy) changedLocked(repo hub.Repo, rec *repoRecord) { p.dirty[repo.Folded()] = rec }

// grantedFile records that upstream answered caller's resolve of one of
// repo's files with its metadata.
func (p *policy) grantedFile(caller hub.Caller, repo hub.Repo) {
	p.grant(caller, repo, func(r *repoRecord) *map[string]time.Time { return &r.Files })
}

// grantedMeta records that upstream answered caller's metadata request
// about repo (repo info, tree, paths-info): a grant of metadata only.
func (p *policy) grantedMeta(caller hub.Caller, repo hub.Repo) {
	p.grant(caller, repo, func(r *repoRecord) *map[string]time.Time { return &r.Meta })
}

func (p *policy) grant(caller hub.Caller, repo hub.Repo, field func(*repoRecord) *map[string]time.Time) {
	id := caller.ID()
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.recordLocked(repo)
	m, now := field(rec), p.now()
	if t, ok := (*m)[id]; ok && now.Sub(t) < p.accessTTL/4 {
		return // fresh enough; spare the write
	}
	if *m == nil {
		*m = make(map[string]time.Time)
	}
	(*m)[id] = now
	trimOldest(*m, maxGrantsPerRepo)
	p.changedLocked(repo, rec)
}

// servedAnonymously records that upstream answered an anonymous caller about
// path at commit (its bytes, or that it does not exist).
func (p *policy) servedAnonymously(repo hub.Repo, commit, path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.recordLocked(repo)
	k, now := commit+"/"+path, p.now()
	if t, ok := rec.Anonymous[k]; ok && now.Sub(t) < p.accessTTL/4 {
		return
	}
	if rec.Anonymous == nil {
		rec.Anonymous = make(map[string]time.Time)
	}
	rec.Anonymous[k] = now
	trimOldest(rec.Anonymous, maxAnonymousPerRepo)
	p.changedLocked(repo, rec)
}

// refused records that upstream refused caller. The caller's grants are
// gone; and what the refusal says of the repo itself (gated, or not found,
// or closed to anonymous callers) makes it not public.
func (p *policy) refused(caller hub.Caller, repo hub.Repo, se *fetch.StatusError) {
	id := caller.ID()
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.recordLocked(repo)
	_, f := rec.Files[id]
	_, m := rec.Meta[id]
	if f || m {
		delete(rec.Files, id)
		delete(rec.Meta, id)
		p.changedLocked(repo, rec)
	}
	if caller.Anonymous() || se.ErrorCode == "GatedRepo" || se.ErrorCode == "RepoNotFound" {
		p.setVisibilityLocked(repo, rec, false, p.now())
	}
}

// visible records what upstream said of the repo itself: public only from
// hubproxy's own anonymous probe, not public from anything. at is when the
// answer was asked for: a probe sent before a refusal (the repo turning
// gated in between) may arrive after it, and must not undo it.
func (p *policy) visible(repo hub.Repo, public bool, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setVisibilityLocked(repo, p.recordLocked(repo), public, at)
}

func (p *policy) setVisibilityLocked(repo hub.Repo, rec *repoRecord, public bool, at time.Time) {
	v := rec.Visibility
	if public && v != nil && !v.Public && !at.After(v.At) {
		return // older than the "not public" we hold: fail closed
	}
	if v != nil && v.Public == public && at.Sub(v.At) < time.Second {
		return
	}
	if v != nil && v.Public != public {
		p.log.Info("repo visibility changed upstream", "repo", repo.String(), "public", public)
	}
	rec.Visibility = &belief{Public: public, At: at}
	p.changedLocked(repo, rec)
}

// live reports whether caller may reuse an answer about repo's files now
// without asking upstream: its own file grant, or the repo's public
// visibility, is no older than access-ttl.
func (p *policy) live(caller hub.Caller, repo hub.Repo) bool {
	id := caller.ID()
	p.mu.Lock()
	defer p.mu.Unlock()
	rec, now := p.recordLocked(repo), p.now()
	if t, ok := rec.Files[id]; ok && now.Sub(t) < p.accessTTL {
		return true
	}
	v := rec.Visibility
	return v != nil && v.Public && now.Sub(v.At) < p.accessTTL
}

// liveAnonymous reports whether upstream answered an anonymous caller about
// path at commit within access-ttl.
func (p *policy) liveAnonymous(repo hub.Repo, commit, path string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.recordLocked(repo).Anonymous[commit+"/"+path]
	return ok && p.now().Sub(t) < p.accessTTL
}

// reason names why the policy allowed an answer without upstream.
type reason string

// fallback decides whether caller may have a cached answer about one of
// repo's files while upstream cannot be asked. anonAt is when upstream last
// gave this very answer to an anonymous caller (zero: never); file answers
// look it up by commit and path with anonymousAt. It returns
// ErrUnverifiable (fail closed) when nothing upstream said covers the
// caller.
func (p *policy) fallback(caller hub.Caller, repo hub.Repo, anonAt time.Time) (reason, error) {
	return p.decide(caller, repo, anonAt, false)
}

// fallbackMeta is fallback for a cached metadata answer (repo info, tree,
// paths-info), which a metadata grant also covers.
func (p *policy) fallbackMeta(caller hub.Caller, repo hub.Repo, anonAt time.Time) (reason, error) {
	return p.decide(caller, repo, anonAt, true)
}

func (p *policy) decide(caller hub.Caller, repo hub.Repo, anonAt time.Time, meta bool) (reason, error) {
	id := caller.ID()
	p.mu.Lock()
	defer p.mu.Unlock()
	rec, now := p.recordLocked(repo), p.now()
	v := rec.Visibility
	if !anonAt.IsZero() && now.Sub(anonAt) < p.publicTTL && (v == nil || v.Public || v.At.Before(anonAt)) {
		return "served anonymously", nil
	}
	if v != nil && v.Public && now.Sub(v.At) < p.publicTTL {
		return "public repo", nil
	}
	within := max(p.accessTTL, p.grace)
	if t, ok := rec.Files[id]; ok && now.Sub(t) < within {
		return "caller granted the files", nil
	}
	if t, ok := rec.Meta[id]; meta && ok && now.Sub(t) < within {
		return "caller granted the metadata", nil
	}
	return "", ErrUnverifiable
}

// anonymousAt is when upstream last answered an anonymous caller about path
// at commit; zero if never.
func (p *policy) anonymousAt(repo hub.Repo, commit, path string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recordLocked(repo).Anonymous[commit+"/"+path]
}

// flush persists every changed record. A record stays findable (flushing)
// until its write has finished, so no one reloads an older copy meanwhile.
func (p *policy) flush() error {
	p.mu.Lock()
	docs := make(map[hub.Repo][]byte, len(p.dirty))
	for repo, rec := range p.dirty {
		b, err := json.Marshal(rec)
		if err != nil {
			continue // only maps of times and bools: cannot fail
		}
		docs[repo] = b
		p.flushing[repo] = rec
	}
	clear(p.dirty)
	p.mu.Unlock()
	var errs []error
	for repo, b := range docs {
		err := p.store.PutMeta(policyKey(repo), b)
		p.mu.Lock()
		rec := p.flushing[repo]
		delete(p.flushing, repo)
		if err != nil {
			errs = append(errs, err)
			if _, again := p.dirty[repo]; !again {
				p.dirty[repo] = rec // write it next time
			}
		}
		p.mu.Unlock()
	}
	return errors.Join(errs...)
}

// trimOldest drops the oldest entries of m beyond limit.
func trimOldest(m map[string]time.Time, limit int) {
	for len(m) > limit {
		var oldest string
		var at time.Time
		for k, t := range m {
			if oldest == "" || t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(m, oldest)
	}
}
