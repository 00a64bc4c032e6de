package app_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// Found by a second review of the access policy and admission, after the
// first round of fixes; each test is one trick that worked then.

// A public repo an anonymous caller read turns gated. Afterwards, only its
// metadata is read (by anyone, unprojected: the answer says gated "auto"),
// then upstream fails. The docs promise the anonymous "served" record holds
// only "if upstream ... has not since said the repo is not public": here it
// has said so, in its own unprojected answer.
func TestMetadataSayingGatedEndsAnonymousOutageAnswers(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	e := newEnv(t, hubtest.Options{}, withClock(clk, nil))
	data := hubtest.RandomBytes(7, 200<<10)
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), ApprovedTokens: []string{"hf_granted"}, Files: []hubtest.File{{Path: "w.bin", Data: data}}})
	if code, _ := statusOf(e, http.MethodGet, "/org/model/resolve/main/w.bin", ""); code != 200 {
		t.Fatal("anon while public")
	}
	e.Hub.SetAccess(model, true, false)
	clk.Advance(2 * time.Minute)
	for _, a := range []string{"", "Bearer hf_granted", "Bearer hf_denied"} {
		resp, body := e.Do(http.MethodGet, "/api/models/org/model", authHeader(a)...)
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"gated":"`)) {
			t.Fatalf("metadata by %q: %d %s", a, resp.StatusCode, body)
		}
	}
	outage(e, "503")
	clk.Advance(time.Minute)
	if code, body := statusOf(e, http.MethodGet, "/org/model/resolve/main/w.bin", ""); code == 200 && bytes.Equal(body, data) {
		t.Errorf("anonymous gets the now-gated file in an outage although upstream's unprojected info said gated")
	}
}

// The Hub answers a renamed repo's old name with a relative 307 to the new
// one (huggingface_hub follows it: "repo renamed"). deny-repos matches only
// the name asked for, so the old name reaches a denied repo.
func TestRenameRedirectIsHeldToDenyRepos(t *testing.T) {
	h := hubtest.NewT(t, hubtest.Options{})
	secret := []byte(`{"denied":"content"}`)
	h.AddRepo(hubtest.RepoSpec{ID: "openai-community/gpt2", Files: []hubtest.File{{Path: "config.json", Data: secret}}})
	target, _ := url.Parse(h.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		for _, pre := range []string{"/gpt2/", "/api/models/gpt2/", "/api/models/gpt2"} {
			if strings.HasPrefix(p, pre) || p == strings.TrimSuffix(pre, "/") {
				loc := strings.Replace(p, "gpt2", "openai-community/gpt2", 1)
				if r.URL.RawQuery != "" {
					loc += "?" + r.URL.RawQuery
				}
				w.Header().Set("Location", loc)
				w.WriteHeader(http.StatusTemporaryRedirect)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	e := &env{T: t, Hub: h, Dir: t.TempDir()}
	e.Cfg = app.Config{Upstream: front.URL, CacheDir: e.Dir, BlockSize: blockSize, DenyRepos: []string{"openai-community/*"}}
	e.Start()
	t.Cleanup(e.Stop)
	if code, _ := statusOf(e, http.MethodGet, "/openai-community/gpt2/resolve/main/config.json", ""); code != 403 {
		t.Fatalf("direct: %d, want 403", code)
	}
	for _, p := range []string{"/gpt2/resolve/main/config.json", "/api/models/gpt2", "/api/models/gpt2/tree/main"} {
		code, body := statusOf(e, http.MethodGet, p, "")
		if code == 200 {
			t.Errorf("deny-repos openai-community/* bypassed via the old name: GET %s -> %d %.80s", p, code, body)
		}
	}
}

// With outage-grace set, anonymous callers (one shared identity) hold a
// repo-wide metadata grant. A public repo turns private; upstream then tells
// the proxy so (a stranger's 404 RepoNotFound, which marks it not public);
// in an outage hours later, anonymous callers still get its cached tree and
// info from the anonymous metadata grant, though upstream said it is hidden.
func TestAnonymousMetadataDoesNotOutliveAPrivateTurn(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	e := newEnv(t, hubtest.Options{}, withClock(clk, func(c *app.Config) { c.OutageGrace = 24 * time.Hour }))
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), ApprovedTokens: []string{"hf_owner"}, Files: []hubtest.File{{Path: "secret-plan.bin", Data: []byte("x")}}})
	for _, p := range []string{"/api/models/org/model", "/api/models/org/model/tree/main"} {
		if code, _ := statusOf(e, http.MethodGet, p, ""); code != 200 {
			t.Fatalf("anon meta while public: %d", code)
		}
	}
	e.Hub.SetAccess(model, false, true)
	clk.Advance(2 * time.Minute)
	if code, _ := statusOf(e, http.MethodGet, "/org/model/resolve/main/secret-plan.bin", "Bearer hf_stranger"); code != 404 {
		t.Fatalf("stranger after private: %d", code)
	}
	outage(e, "503")
	clk.Advance(3 * time.Hour)
	for _, p := range []string{"/api/models/org/model", "/api/models/org/model/tree/main"} {
		if code, body := statusOf(e, http.MethodGet, p, ""); code == 200 {
			t.Errorf("anonymous replays %s of a repo upstream said is private, 3h later: %.60s", p, body)
		}
	}
}
