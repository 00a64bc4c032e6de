package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// TestGatedContentNeverLeaks fills the cache as an approved token holder and
// then asks for the same content as every kind of caller the hub refuses.
func TestGatedContentNeverLeaks(t *testing.T) {
	const accessTTL = time.Minute
	clock := testutil.NewClock(time.Now())
	e := newEnv(t, hubtest.Options{}, func(c *app.Config) {
		c.AccessTTL, c.Now, c.UpstreamToken = accessTTL, clock.Now, "hf_proxy_own"
	})
	weights := hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "F32", Shape: []int64{256, 256}}}, nil)
	gated := hub.MustRepo(hub.Model, "org/gated")
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: gated.ID(), Gated: true, ApprovedTokens: []string{"hf_ok", "hf_revoked", "hf_proxy_own"},
		Files: []hubtest.File{{Path: "model.safetensors", Data: weights}, {Path: "config.json", Data: []byte(`{"a":1}`)}}})

	requests := []struct {
		method, path string
		hdr          []string
	}{
		{http.MethodHead, "/org/gated/resolve/main/model.safetensors", nil},
		{http.MethodGet, "/org/gated/resolve/main/model.safetensors", nil},
		{http.MethodGet, "/org/gated/resolve/main/model.safetensors", []string{"Range", "bytes=100-199"}},
		{http.MethodGet, "/org/gated/resolve/main/config.json", nil},
		{http.MethodGet, "/org/gated/raw/main/config.json", nil},
		{http.MethodGet, "/models/org/gated/tensors", nil},
		{http.MethodGet, "/models/org/gated/tensors/w", nil},
		{http.MethodGet, "/models/org/gated/safetensors?name=w", nil},
	}
	ask := func(auth string, rq struct {
		method, path string
		hdr          []string
	}) *http.Response {
		hdr := append([]string{}, rq.hdr...)
		if auth != "" {
			hdr = append(hdr, "Authorization", "Bearer "+auth)
		}
		resp, _ := e.Do(rq.method, rq.path, hdr...)
		return resp
	}
	// Approved callers fill everything.
	for _, tok := range []string{"hf_ok", "hf_revoked"} {
		for _, rq := range requests {
			if resp := ask(tok, rq); resp.StatusCode >= 300 {
				t.Fatalf("%s %s as %s: %d", rq.method, rq.path, tok, resp.StatusCode)
			}
		}
	}
	e.Hub.RevokeToken("hf_revoked")
	clock.Advance(2 * accessTTL) // the revoked token's cached decisions lapse
	e.Hub.ResetCounters()

	for _, caller := range []struct{ name, tok string }{{"anonymous", ""}, {"unapproved", "hf_nope"}, {"revoked", "hf_revoked"}} {
		for _, rq := range requests {
			resp := ask(caller.tok, rq)
			code := resp.Header.Get("X-Error-Code")
			if (resp.StatusCode != 401 && resp.StatusCode != 403) || code != "GatedRepo" {
				t.Errorf("%s %s %s: %d %q, want the hub's 401/403 GatedRepo", caller.name, rq.method, rq.path, resp.StatusCode, code)
			}
		}
	}
	if c := e.Hub.Counters(); c.BodyBytes != 0 {
		t.Errorf("refused callers caused %d upstream body bytes", c.BodyBytes)
	}
	// The gated repo's metadata is public on the Hub (docs/hub-protocol.md
	// §9): everyone gets it, and it unlocks none of the content above.
	for _, caller := range []struct{ name, tok string }{{"anonymous", ""}, {"unapproved", "hf_nope"}, {"revoked", "hf_revoked"}} {
		for _, p := range []string{"/api/models/org/gated/revision/main", "/api/models/org/gated/tree/main"} {
			if resp := ask(caller.tok, struct {
				method, path string
				hdr          []string
			}{http.MethodGet, p, nil}); resp.StatusCode != 200 {
				t.Errorf("%s GET %s: %d, want 200 as the Hub answers", caller.name, p, resp.StatusCode)
			}
		}
		for _, rq := range requests {
			if resp := ask(caller.tok, rq); resp.StatusCode != 401 && resp.StatusCode != 403 {
				t.Errorf("%s %s %s after reading metadata: %d, want the hub's 401/403", caller.name, rq.method, rq.path, resp.StatusCode)
			}
		}
	}
	// The approved holder still gets everything, from the cache.
	e.Hub.ResetCounters()
	resp, body := e.Do(http.MethodGet, "/org/gated/resolve/main/model.safetensors", "Authorization", "Bearer hf_ok")
	if resp.StatusCode != 200 || sha(body) != sha(weights) {
		t.Fatalf("approved caller: %d", resp.StatusCode)
	}
	if c := e.Hub.Counters(); c.BodyBytes != 0 || c.CDNRequests != 0 {
		t.Errorf("approved caller refetched: %d bytes, %d CDN requests", c.BodyBytes, c.CDNRequests)
	}

	// Upstream down: once its decisions lapse, a gated repo is never served
	// from the cache, to anyone.
	clock.Advance(2 * accessTTL)
	e.Hub.Close()
	e.Start()
	for _, tok := range []string{"", "hf_ok"} {
		for _, rq := range requests[:2] {
			if resp := ask(tok, rq); resp.StatusCode < 500 {
				t.Errorf("upstream down, %q %s %s: %d, want a refusal", tok, rq.method, rq.path, resp.StatusCode)
			}
		}
	}
	e.Cfg.Offline = true
	e.Start()
	if resp := ask("hf_ok", requests[1]); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Error-Code") != "Unverifiable" {
		t.Errorf("offline mode served a gated repo: %d %s", resp.StatusCode, resp.Header.Get("X-Error-Code"))
	}
}
