package soak

import (
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// A change is visible from when it started applying, and the old state
// until it had finished: both are possible in between.
func TestHistoryWindows(t *testing.T) {
	r := hub.MustRepo(hub.Model, "a/b")
	h := newHistory(&hubState{gated: map[hub.Repo]bool{}, private: map[hub.Repo]bool{},
		approved: map[hub.Repo]map[string]bool{r: {tokAlice: true}}, revoked: map[string]bool{}, heads: map[hub.Repo]string{}}, time.Now().Add(-2*time.Hour))
	var begin, end time.Time
	h.change(func() func(*hubState) {
		begin = time.Now()
		time.Sleep(20 * time.Millisecond)
		end = time.Now()
		return func(st *hubState) { st.gated[r] = true }
	})
	before := h.verdicts(anon, r, true, begin.Add(-time.Hour), begin.Add(-time.Millisecond))
	during := h.verdicts(anon, r, true, begin.Add(5*time.Millisecond), begin.Add(5*time.Millisecond))
	after := h.verdicts(anon, r, true, end.Add(time.Millisecond), end.Add(time.Hour))
	if len(before) != 1 || !before[0].allowed {
		t.Errorf("before: %v", before)
	}
	if len(during) != 2 {
		t.Errorf("while applying: %v, want both", during)
	}
	if len(after) != 1 || after[0] != (verdict{status: 401, code: "GatedRepo"}) {
		t.Errorf("after: %v", after)
	}
	if v := h.verdicts(tokAlice, r, true, end, end.Add(time.Hour)); len(v) != 1 || !v[0].allowed {
		t.Errorf("alice, approved: %v", v)
	}
	// The gate is for files: the gated repo's metadata is anyone's.
	if v := h.verdicts(anon, r, false, end.Add(time.Millisecond), end.Add(time.Hour)); len(v) != 1 || !v[0].allowed {
		t.Errorf("anonymous, the gated repo's metadata: %v", v)
	}
	if !h.accessChanged(r, begin.Add(-time.Hour), end.Add(time.Hour)) || h.accessChanged(r, end.Add(time.Millisecond), end.Add(time.Hour)) {
		t.Error("accessChanged does not follow the change")
	}
}

// A private repo is invisible to strangers on every route, its metadata
// included: 401 RepoNotFound anonymous, 404 with a token.
func TestHistoryPrivateMetadata(t *testing.T) {
	r := hub.MustRepo(hub.Model, "a/b")
	st := &hubState{gated: map[hub.Repo]bool{}, private: map[hub.Repo]bool{r: true},
		approved: map[hub.Repo]map[string]bool{r: {tokAlice: true}}, revoked: map[string]bool{}, heads: map[hub.Repo]string{}}
	for _, content := range []bool{true, false} {
		if v := st.decide(anon, r, content); v != (verdict{status: 401, code: "RepoNotFound"}) {
			t.Errorf("anonymous, content %v: %v", content, v)
		}
		if v := st.decide(tokCarol, r, content); v != (verdict{status: 404, code: "RepoNotFound"}) {
			t.Errorf("a stranger's token, content %v: %v", content, v)
		}
		if v := st.decide(tokAlice, r, content); !v.allowed {
			t.Errorf("alice, content %v: %v", content, v)
		}
	}
}
