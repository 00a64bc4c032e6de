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
// only remembers what upstream said, and when:
//
//   - a caller's grant: upstream answered this credential (anonymous
//     included) for this repo. It lets the caller reuse answers for
//     access-ttl, and during an outage for max(access-ttl, outage-grace);
//     a refusal of that credential erases it.
//   - what upstream served anonymously: per file and commit. During an
//     outage anyone may have such a file from the cache, unless upstream has
//     said since that the repo is not public.
//   - the repo's visibility: what upstream says of the repo itself, from
//     repo-info answers (private/gated fields, whoever asked) and refusals
//     (GatedRepo, RepoNotFound, an anonymous 401). A public repo's cached
//     files may be served to anyone during an outage.
//
// Outage beliefs (anonymous files, visibility) are trusted for PublicTTL.
// Everything is persisted (write-behind, once a second), so a restart during
// an outage keeps what was learnt; a crash loses at most a second of it,
// which only ever fails closed.
type policy struct {
	// Immutable after newPolicy.
	store                       Store
	now                         func() time.Time
	accessTTL, publicTTL, grace time.Duration
	log                         *slog.Logger

	mu sync.Mutex
	// Guarded by mu.
	repos *lru.Cache[hub.Repo, *repoRecord] // loaded records, most recently used kept
	dirty map[hub.Repo]*repoRecord          // changed since the last flush; kept even if evicted from repos
}

// repoRecord is what the policy knows of one repo. Its JSON form is the
// persisted document.
type repoRecord struct {
	Visibility *belief              `json:"visibility,omitempty"`
	Anonymous  map[string]time.Time `json:"anonymous,omitempty"` // "commit/path" → last anonymous answer
	Grants     map[string]time.Time `json:"grants,omitempty"`    // caller id → last grant
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
		repos: c, dirty: make(map[hub.Repo]*repoRecord)}
}

func policyKey(repo hub.Repo) string { return "policy\x00" + repo.String() }

// recordLocked returns repo's record, loading it from the store on first use.
func (p *policy) recordLocked(repo hub.Repo) *repoRecord {
	if rec, ok := p.dirty[repo]; ok {
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

func (p *policy) changedLocked(repo hub.Repo, rec *repoRecord) { p.dirty[repo] = rec }

// granted records that upstream answered caller about repo (an access check
// that passed: a file, an API answer, EntryNotFound, RevisionNotFound).
func (p *policy) granted(caller string, repo hub.Repo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.recordLocked(repo)
	now := p.now()
	if t, ok := rec.Grants[caller]; ok && now.Sub(t) < p.accessTTL/4 {
		return // fresh enough; spare the write
	}
	if rec.Grants == nil {
		rec.Grants = make(map[string]time.Time)
	}
	rec.Grants[caller] = now
	trimOldest(rec.Grants, maxGrantsPerRepo)
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

// refused records that upstream refused caller. The caller's grant is gone;
// and what the refusal says of the repo itself (gated, or not found, or
// closed to anonymous callers) makes it not public.
func (p *policy) refused(caller string, anonymous bool, repo hub.Repo, se *fetch.StatusError) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.recordLocked(repo)
	if _, ok := rec.Grants[caller]; ok {
		delete(rec.Grants, caller)
		p.changedLocked(repo, rec)
	}
	if anonymous || se.ErrorCode == "GatedRepo" || se.ErrorCode == "RepoNotFound" {
		p.setVisibilityLocked(repo, rec, false)
	}
}

// visible records what upstream says of the repo itself.
func (p *policy) visible(repo hub.Repo, public bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setVisibilityLocked(repo, p.recordLocked(repo), public)
}

func (p *policy) setVisibilityLocked(repo hub.Repo, rec *repoRecord, public bool) {
	now := p.now()
	if v := rec.Visibility; v != nil && v.Public == public && now.Sub(v.At) < time.Second {
		return
	}
	if v := rec.Visibility; v != nil && v.Public != public {
		p.log.Info("repo visibility changed upstream", "repo", repo.String(), "public", public)
	}
	rec.Visibility = &belief{Public: public, At: now}
	p.changedLocked(repo, rec)
}

// live reports whether caller may reuse an answer about repo now without
// asking upstream: its own grant, or the repo's public visibility, is no
// older than access-ttl.
func (p *policy) live(caller string, repo hub.Repo) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec, now := p.recordLocked(repo), p.now()
	if t, ok := rec.Grants[caller]; ok && now.Sub(t) < p.accessTTL {
		return true
	}
	v := rec.Visibility
	return v != nil && v.Public && now.Sub(v.At) < p.accessTTL
}

// reason names why the policy allowed an answer without upstream.
type reason string

// fallback decides whether caller may have an answer about repo from the
// cache while upstream cannot be asked. anonAt is when upstream last gave
// this very answer to an anonymous caller (zero: never); file answers look it
// up by commit and path with anonymousAt. It returns ErrUnverifiable (fail
// closed) when nothing upstream said covers the caller.
func (p *policy) fallback(caller string, repo hub.Repo, anonAt time.Time) (reason, error) {
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
	if t, ok := rec.Grants[caller]; ok && now.Sub(t) < max(p.accessTTL, p.grace) {
		return "caller granted", nil
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

// flush persists every changed record.
func (p *policy) flush() error {
	p.mu.Lock()
	docs := make(map[hub.Repo][]byte, len(p.dirty))
	for repo, rec := range p.dirty {
		b, err := json.Marshal(rec)
		if err != nil {
			continue // only maps of times and bools: cannot fail
		}
		docs[repo] = b
	}
	clear(p.dirty)
	p.mu.Unlock()
	var errs []error
	for repo, b := range docs {
		if err := p.store.PutMeta(policyKey(repo), b); err != nil {
			errs = append(errs, err)
		}
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
