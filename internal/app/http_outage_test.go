package app_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

func withClock(c *testutil.Clock, more func(*app.Config)) func(*app.Config) {
	return func(cfg *app.Config) {
		cfg.Now = c.Now
		if more != nil {
			more(cfg)
		}
	}
}

// outage makes every hub answer fail the way kind says: "503" or "429"
// (after the proxy's retries), or "down" (the hub is gone).
func outage(e *env, kind string) {
	switch kind {
	case "503":
		e.Hub.SetFaults(hubtest.Faults{Status5xx: hubtest.Fault{N: 1 << 30}})
	case "429":
		e.Hub.SetFaults(hubtest.Faults{TooManyRequests: hubtest.Fault{N: 1 << 30}})
	case "down":
		e.Hub.Close()
	}
}

// statusOf returns the status and body of a request to e by auth ("" =
// anonymous).
func statusOf(e *env, method, path, auth string, hdr ...string) (int, []byte) {
	if auth != "" {
		hdr = append(hdr, "Authorization", auth)
	}
	resp, body := e.Do(method, path, hdr...)
	return resp.StatusCode, body
}

// A repo that was public, then turned gated: a granted caller fills a file,
// then upstream fails (503, then 429, which any caller can provoke). No
// anonymous or refused caller gets that file, or any other, from the cache,
// in any form: HEAD, GET, Range, tensor routes.
func TestGatedFilesAreNeverServedToRefusedCallersDuringOutages(t *testing.T) {
	for _, kind := range []string{"503", "429"} {
		t.Run(kind, func(t *testing.T) {
			clk := testutil.NewClock(time.Now())
			e := newEnv(t, hubtest.Options{}, withClock(clk, nil))
			const tok = "hf_granted"
			weights := hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "F32", Shape: []int64{4096}}}, nil)
			e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), ApprovedTokens: []string{tok}, Files: []hubtest.File{
				{Path: "config.json", Data: []byte(`{"model_type":"x"}`)}, {Path: "model.safetensors", Data: weights},
			}})
			if code, _ := statusOf(e, http.MethodGet, "/org/model/resolve/main/config.json", ""); code != 200 {
				t.Fatalf("anonymous read while public: %d", code)
			}
			e.Hub.SetAccess(model, true, false)
			clk.Advance(2 * time.Second)
			if code, body := statusOf(e, http.MethodGet, "/org/model/resolve/main/model.safetensors", "Bearer "+tok); code != 200 || !bytes.Equal(body, weights) {
				t.Fatalf("granted fill: %d", code)
			}
			outage(e, kind)
			clk.Advance(2 * time.Minute) // past every cached decision
			for _, auth := range []string{"", "Bearer hf_denied"} {
				for _, req := range []struct {
					method, path string
					hdr          []string
				}{
					{http.MethodHead, "/org/model/resolve/main/model.safetensors", nil},
					{http.MethodGet, "/org/model/resolve/main/model.safetensors", nil},
					{http.MethodGet, "/org/model/resolve/main/model.safetensors", []string{"Range", "bytes=0-99"}},
					{http.MethodGet, "/org/model/resolve/main/config.json", nil},
					{http.MethodGet, "/models/org/model/tensors", nil},
					{http.MethodGet, "/models/org/model/tensors/w", nil},
				} {
					code, body := statusOf(e, req.method, req.path, auth, req.hdr...)
					if code < 400 || bytes.Contains(body, weights[100:200]) {
						t.Errorf("%s %s %s by %q during a %s outage: %d", req.method, req.path, req.hdr, auth, kind, code)
					}
				}
			}
		})
	}
}

// A public repo read only with tokens (clusters that set HF_TOKEN
// everywhere) stays served from the cache to everyone during an outage:
// public-ness comes from what upstream says of the repo, not from who asked.
func TestPublicRepoReadWithTokensIsServedDuringAnOutage(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	e := newEnv(t, hubtest.Options{}, withClock(clk, nil))
	data := hubtest.RandomBytes(41, 300<<10)
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{{Path: "w.bin", Data: data}}})
	if code, _ := statusOf(e, http.MethodGet, "/org/model/resolve/main/w.bin", "Bearer hf_any"); code != 200 {
		t.Fatalf("fill: %d", code)
	}
	outage(e, "503")
	clk.Advance(10 * time.Minute)
	for _, auth := range []string{"", "Bearer hf_any", "Bearer hf_other"} {
		if code, body := statusOf(e, http.MethodGet, "/org/model/resolve/main/w.bin", auth); code != 200 || !bytes.Equal(body, data) {
			t.Errorf("%q during the outage: %d", auth, code)
		}
	}
}

// outage-grace: a caller upstream granted a gated repo keeps reading it from
// the cache during an outage, within the grace; nobody else does.
func TestOutageGraceKeepsGrantedCallersServed(t *testing.T) {
	clk := testutil.NewClock(time.Now())
	e := newEnv(t, hubtest.Options{}, withClock(clk, func(c *app.Config) { c.OutageGrace = 24 * time.Hour }))
	const tok = "hf_granted"
	data := hubtest.RandomBytes(42, 300<<10)
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Gated: true, ApprovedTokens: []string{tok}, Files: []hubtest.File{{Path: "w.bin", Data: data}}})
	if code, _ := statusOf(e, http.MethodGet, "/org/model/resolve/main/w.bin", "Bearer "+tok); code != 200 {
		t.Fatalf("fill: %d", code)
	}
	outage(e, "down")
	e.Start() // a restart during the outage keeps what was learnt
	clk.Advance(6 * time.Hour)
	if code, body := statusOf(e, http.MethodGet, "/org/model/resolve/main/w.bin", "Bearer "+tok); code != 200 || !bytes.Equal(body, data) {
		t.Errorf("granted caller within the grace: %d", code)
	}
	for _, auth := range []string{"", "Bearer hf_other"} {
		if code, _ := statusOf(e, http.MethodGet, "/org/model/resolve/main/w.bin", auth); code != 503 {
			t.Errorf("%q: %d, want 503 Unverifiable", auth, code)
		}
	}
	clk.Advance(19 * time.Hour)
	if code, _ := statusOf(e, http.MethodGet, "/org/model/resolve/main/w.bin", "Bearer "+tok); code != 503 {
		t.Errorf("past the grace: %d, want 503", code)
	}
}

// A hub that accepts connections but never answers costs one metadata
// timeout; after that, cached files and API answers are served at cache
// speed without asking it again (until a probe), and nothing hangs.
func TestHungUpstreamIsRememberedAndCachedContentServed(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, func(c *app.Config) {
		c.MetadataTimeout = 300 * time.Millisecond
		c.UpstreamCooldown = time.Hour
	})
	data := hubtest.RandomBytes(43, 200<<10)
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{{Path: "w.bin", Data: data}}})
	const info = "/api/models/org/model/revision/main"
	if code, _ := statusOf(e, http.MethodGet, "/org/model/resolve/main/w.bin", ""); code != 200 {
		t.Fatalf("fill: %d", code)
	}
	if code, _ := statusOf(e, http.MethodGet, info, ""); code != 200 {
		t.Fatalf("repo info: %d", code)
	}
	e.Start() // forget the resolutions: every request below must ask upstream, or not
	e.Hub.SetFaults(hubtest.Faults{Latency: time.Hour})
	before := e.Hub.Counters().Requests
	for i := range 10 {
		if code, body := statusOf(e, http.MethodGet, "/org/model/resolve/main/w.bin", ""); code != 200 || !bytes.Equal(body, data) {
			t.Fatalf("cached file %d with the hub hung: %d", i, code)
		}
		if code, body := statusOf(e, http.MethodGet, info, ""); code != 200 || !strings.Contains(string(body), `"id"`) {
			t.Fatalf("cached repo info %d with the hub hung: %d %s", i, code, body)
		}
	}
	if n := e.Hub.Counters().Requests - before; n > 2 {
		t.Errorf("the hung hub was asked %d times for 20 requests; want the outage remembered", n)
	}
	// An uncached API call fails fast with a clear error rather than hanging.
	if code, _ := statusOf(e, http.MethodGet, "/api/models/org/model/tree/main", ""); code < 500 {
		t.Errorf("uncached API call during the outage: %d", code)
	}
}

// Frameworks probe for files that do not exist (adapter_config.json on a
// plain model, model.safetensors on a sharded one) and need the hub's 404
// EntryNotFound. Such answers are kept per commit, so a previously loaded
// public model loads again with the hub gone, probes and all.
func TestFrameworkLoadReplaysWithTheHubGone(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	commit := e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{
		{Path: "config.json", Data: []byte(`{"model_type":"bert"}`)},
		{Path: "model.safetensors", Data: hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "F16", Shape: []int64{64}}}, nil)},
	}})
	load := []struct {
		path string
		code int
	}{
		{"config.json", 200}, {"adapter_config.json", 404}, {"model.safetensors", 200},
		{"model.safetensors.index.json", 404}, {"modules.json", 404}, {"tokenizer_config.json", 404},
	}
	replay := func(when string) {
		for _, f := range load {
			for _, method := range []string{http.MethodHead, http.MethodGet} {
				resp, _ := e.Do(method, "/org/model/resolve/main/"+f.path)
				if resp.StatusCode != f.code {
					t.Errorf("%s: %s %s = %d, want %d", when, method, f.path, resp.StatusCode, f.code)
				}
				if f.code == 404 && (resp.Header.Get("X-Error-Code") != "EntryNotFound" || resp.Header.Get("X-Repo-Commit") != commit) {
					t.Errorf("%s: %s %s: X-Error-Code %q, X-Repo-Commit %q", when, method, f.path,
						resp.Header.Get("X-Error-Code"), resp.Header.Get("X-Repo-Commit"))
				}
			}
		}
	}
	replay("online")
	resolves := e.Hub.Counters().ResolveRequests
	replay("again")
	if n := e.Hub.Counters().ResolveRequests - resolves; n != 0 {
		t.Errorf("a second load asked upstream %d times", n)
	}
	e.Hub.Close()
	e.Start()
	replay("hub gone, after a restart")
}

// An uncached API relay whose upstream sends headers and then goes quiet is
// cut after the stall timeout: the client sees a failed transfer, never a
// short answer that looks complete, and the proxy does not hang with it.
func TestStalledAPIRelayIsAborted(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `[{"num":1,`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer up.Close()
	e := newEnv(t, hubtest.Options{}, func(c *app.Config) {
		c.Upstream = up.URL
		c.StallTimeout = 200 * time.Millisecond
	})
	req, _ := http.NewRequest(http.MethodGet, e.Proxy.URL+"/api/models/org/model/discussions", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return // failed before the headers were flushed: a failed transfer too
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("a relay cut off by a stalled upstream read as a complete answer")
	}
}
