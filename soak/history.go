package soak

import (
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// hubState is what decides the hub's answers at one moment: who may read
// which repo, and where each repo's main branch points.
type hubState struct {
	gated, private map[hub.Repo]bool
	approved       map[hub.Repo]map[string]bool
	revoked        map[string]bool
	heads          map[hub.Repo]string
}

func (s *hubState) clone() *hubState {
	return &hubState{gated: maps.Clone(s.gated), private: maps.Clone(s.private),
		approved: s.approved, // never changes after setup
		revoked:  maps.Clone(s.revoked), heads: maps.Clone(s.heads)}
}

// verdict is the hub's answer to a caller about a repo: allowed, or a
// refusal with its status and X-Error-Code.
type verdict struct {
	allowed bool
	status  int
	code    string
}

func (v verdict) String() string {
	if v.allowed {
		return "allowed"
	}
	return http.StatusText(v.status) + " " + v.code
}

// decide is the hub's access rule (docs/hub-protocol.md §9, as
// internal/hubtest's access.go implements it), restated: a private repo the
// caller may not see is RepoNotFound on every route, metadata included (401
// anonymous, 404 with a token); a gated one is behind its gate for file
// content only (GatedRepo: 401 anonymous, 403 with a token, revoked tokens
// included), while its metadata (repo info, tree, paths-info) is public.
// content says which of the two the route serves.
func (s *hubState) decide(caller string, repo hub.Repo, content bool) verdict {
	authed := caller != ""
	approved := authed && !s.revoked[caller] && s.approved[repo][caller]
	switch {
	case s.private[repo] && !approved:
		if authed {
			return verdict{status: http.StatusNotFound, code: "RepoNotFound"}
		}
		return verdict{status: http.StatusUnauthorized, code: "RepoNotFound"}
	case content && s.gated[repo] && !approved:
		if authed {
			return verdict{status: http.StatusForbidden, code: "GatedRepo"}
		}
		return verdict{status: http.StatusUnauthorized, code: "GatedRepo"}
	}
	return verdict{allowed: true}
}

// epoch is one state and when it held: from begin (when the change that
// made it started) until end (when the next change had finished applying;
// the zero time while it is the current state). Changes to the hub are not
// atomic with the clock reading, so the two overlap a little, and both
// states are possible in the overlap.
type epoch struct {
	begin, end time.Time
	st         *hubState
}

// history is the timeline of hub states. The chaos changes the hub only
// through it, so the oracle knows what the hub would have answered when.
type history struct {
	mu     sync.Mutex // serialises changes and guards epochs
	epochs []epoch
}

func newHistory(st *hubState, now time.Time) *history {
	return &history{epochs: []epoch{{begin: now, st: st}}}
}

// change runs apply, which changes the hub(s) and returns how that changes
// the state, and records the new state from before apply started to after
// it ended.
func (h *history) change(apply func() func(*hubState)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	begin := time.Now()
	fn := apply()
	end := time.Now()
	next := h.epochs[len(h.epochs)-1].st.clone()
	fn(next)
	h.epochs[len(h.epochs)-1].end = end
	h.epochs = append(h.epochs, epoch{begin: begin, st: next})
}

// current returns the state now.
func (h *history) current() *hubState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epochs[len(h.epochs)-1].st
}

// during returns every state that held at some moment of [from, to].
func (h *history) during(from, to time.Time) []*hubState {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*hubState
	for _, e := range h.epochs {
		if e.begin.After(to) {
			break
		}
		if e.end.IsZero() || !e.end.Before(from) {
			out = append(out, e.st)
		}
	}
	return out
}

// verdicts is every answer the hub gave caller about repo's content (or
// its metadata) during [from, to].
func (h *history) verdicts(caller string, repo hub.Repo, content bool, from, to time.Time) []verdict {
	var out []verdict
	for _, st := range h.during(from, to) {
		v := st.decide(caller, repo, content)
		if !containsVerdict(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// accessChanged reports whether the hub's answer about repo's content
// changed for some caller during [from, to]: a fill hubproxy started with
// one caller's credentials may then be refused, and another caller's read
// of the same blocks served straight from upstream.
func (h *history) accessChanged(repo hub.Repo, from, to time.Time) bool {
	sts := h.during(from, to)
	for _, st := range sts[min(1, len(sts)):] {
		for _, c := range []string{anon, tokAlice, tokBob, tokCarol, tokProxy} {
			if st.decide(c, repo, true) != sts[0].decide(c, repo, true) {
				return true
			}
		}
	}
	return false
}

func containsVerdict(vs []verdict, v verdict) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// heads is every commit repo's main branch named during [from, to].
func (h *history) heads(repo hub.Repo, from, to time.Time) []string {
	var out []string
	for _, st := range h.during(from, to) {
		if c := st.heads[repo]; c != "" && !containsString(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// everHead reports whether commit was repo's head at some moment up to to:
// what an answer from the cache's refs/ may name while upstream is down.
func (h *history) everHead(repo hub.Repo, commit string, to time.Time) bool {
	for _, st := range h.during(time.Time{}, to) {
		if st.heads[repo] == commit {
			return true
		}
	}
	return false
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
