package app_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// gatedEnv is a proxy in front of a hub holding org/model gated, with one
// approved token that has filled its weights through the proxy.
func gatedEnv(t *testing.T, clk *testutil.Clock) (e *env, weights []byte) {
	t.Helper()
	e = newEnv(t, hubtest.Options{}, withClock(clk, nil))
	weights = hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "F32", Shape: []int64{4096}}}, nil)
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Gated: true, ApprovedTokens: []string{"hf_granted"}, Files: []hubtest.File{
		{Path: "config.json", Data: []byte(`{"model_type":"x"}`)}, {Path: "model.safetensors", Data: weights},
	}})
	if code, body := statusOf(e, http.MethodGet, "/org/model/resolve/main/model.safetensors", "Bearer hf_granted"); code != 200 || !bytes.Equal(body, weights) {
		t.Fatalf("granted fill: %d", code)
	}
	return e, weights
}

// gatedReads are every way to ask for the gated repo's content.
var gatedReads = []struct {
	method, path string
	hdr          []string
}{
	{http.MethodHead, "/org/model/resolve/main/model.safetensors", nil},
	{http.MethodGet, "/org/model/resolve/main/model.safetensors", nil},
	{http.MethodGet, "/org/model/resolve/main/model.safetensors", []string{"Range", "bytes=0-99"}},
	{http.MethodGet, "/models/org/model/tensors", nil},
	{http.MethodGet, "/models/org/model/tensors/w", nil},
}

// The Hub serves a gated repo's metadata to anyone (docs/hub-protocol.md
// §9). A denied token, or an anonymous caller, that reads it through the
// proxy must not thereby be granted the files: not in an outage (503, or a
// 429 any caller can provoke), within access-ttl of that metadata call.
func TestPublicMetadataOfAGatedRepoGrantsNoFiles(t *testing.T) {
	for _, kind := range []string{"503", "429"} {
		for _, auth := range []string{"", "Bearer hf_denied"} {
			t.Run(kind+"/"+auth, func(t *testing.T) {
				clk := testutil.NewClock(time.Now())
				e, weights := gatedEnv(t, clk)
				for _, p := range []string{"/api/models/org/model", "/api/models/org/model/revision/main",
					"/api/models/org/model/tree/main", "/api/models/org/model?expand=private"} {
					if code, _ := statusOf(e, http.MethodGet, p, auth); code != 200 {
						t.Fatalf("metadata %s by %q: %d, want 200 as the Hub answers", p, auth, code)
					}
				}
				outage(e, kind)
				clk.Advance(time.Second) // well within access-ttl
				for _, req := range gatedReads {
					code, body := statusOf(e, req.method, req.path, auth, req.hdr...)
					if code < 400 || bytes.Contains(body, weights[100:200]) {
						t.Errorf("%s %s %s by %q after a metadata call, during a %s outage: %d", req.method, req.path, req.hdr, auth, kind, code)
					}
				}
			})
		}
	}
}

// A client's ?expand=private answer carries no "gated" field; it must not
// make the gated repo public in the proxy's eyes, for anyone, in an outage.
func TestExpandProjectionDoesNotMakeAGatedRepoPublic(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	e, weights := gatedEnv(t, clk)
	for _, auth := range []string{"", "Bearer hf_granted"} {
		if code, _ := statusOf(e, http.MethodGet, "/api/models/org/model?expand=private", auth); code != 200 {
			t.Fatalf("expand=private by %q: %d", auth, code)
		}
	}
	outage(e, "503")
	clk.Advance(2 * time.Minute) // past access-ttl: only a public belief could serve
	for _, auth := range []string{"", "Bearer hf_denied", "Bearer hf_other"} {
		for _, req := range gatedReads {
			code, body := statusOf(e, req.method, req.path, auth, req.hdr...)
			if code < 400 || bytes.Contains(body, weights[100:200]) {
				t.Errorf("%s %s by %q after expand=private, in an outage: %d", req.method, req.path, auth, code)
			}
		}
	}
}

// Online, a missing-file marker a granted caller caused answers only callers
// granted the files: anyone else gets what the Hub says (401/403 GatedRepo),
// even after reading the repo's public metadata.
func TestMissingFileMarkersAnswerOnlyGrantedCallers(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	e, _ := gatedEnv(t, clk)
	const missing = "/org/model/resolve/main/tokenizer.json"
	if code, _ := statusOf(e, http.MethodGet, missing, "Bearer hf_granted"); code != 404 {
		t.Fatalf("granted caller, missing file: %d", code)
	}
	for _, c := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer hf_denied", 403}} {
		if code, _ := statusOf(e, http.MethodGet, "/api/models/org/model", c.auth); code != 200 {
			t.Fatalf("metadata by %q: %d", c.auth, code)
		}
		resp, _ := e.Do(http.MethodGet, missing, authHeader(c.auth)...)
		if resp.StatusCode != c.want || resp.Header.Get("X-Error-Code") != "GatedRepo" {
			t.Errorf("%q asks for a file known missing: %d %s, want the hub's %d GatedRepo",
				c.auth, resp.StatusCode, resp.Header.Get("X-Error-Code"), c.want)
		}
	}
}

// In an outage, an anonymous caller cannot tell a private repo the proxy
// serves from one it never heard of: one answer for both.
func TestOutageAnswersPrivateAndUnknownReposAlike(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	e := newEnv(t, hubtest.Options{}, withClock(clk, nil))
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Private: true, ApprovedTokens: []string{"hf_owner"}, Files: []hubtest.File{
		{Path: "config.json", Data: []byte(`{}`)}}})
	if code, _ := statusOf(e, http.MethodGet, "/org/model/resolve/main/config.json", "Bearer hf_owner"); code != 200 {
		t.Fatalf("owner fill: %d", code)
	}
	outage(e, "503")
	clk.Advance(2 * time.Minute)
	for _, p := range []string{"/resolve/main/config.json", "/resolve/main/other.json"} {
		known, _ := e.Do(http.MethodGet, "/org/model"+p)
		unknown, _ := e.Do(http.MethodGet, "/org/never-seen"+p)
		if known.StatusCode != unknown.StatusCode || known.Header.Get("X-Error-Code") != unknown.Header.Get("X-Error-Code") {
			t.Errorf("%s in an outage: private repo %d %q, unknown repo %d %q", p,
				known.StatusCode, known.Header.Get("X-Error-Code"), unknown.StatusCode, unknown.Header.Get("X-Error-Code"))
		}
	}
}

func authHeader(auth string) []string {
	if auth == "" {
		return nil
	}
	return []string{"Authorization", auth}
}
