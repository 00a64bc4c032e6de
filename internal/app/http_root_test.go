package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/spectest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// GET / says what this is: JSON by the contract's RootInfo for a client,
// a page for a browser; /openapi.yaml is the contract this build ships.
func TestRootSaysWhatThisIs(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, func(c *app.Config) { c.Version = "1.2.3" })
	resp, body := e.Do(http.MethodGet, "/", "Accept", "application/json")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET / (JSON): %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	spec := spectest.Load(t)
	spec.Conforms(t, spec.Schema(t, "RootInfo"), v, "RootInfo")
	if v["version"] != "1.2.3" || v["name"] != "hubproxy" || v["openapi"] != "/openapi.yaml" {
		t.Errorf("root: %v", v)
	}
	if st, _ := v["status"].(map[string]any); st["upstream"] == nil {
		t.Errorf("root: no upstream state in %v", v["status"])
	}
	if f, ok := v["in_flight"].(map[string]any); !ok || f["transfers"] != float64(0) {
		t.Errorf("root: in_flight %v, want none", v["in_flight"])
	}
	routes, _ := v["routes"].([]any)
	var paths []string
	for _, r := range routes {
		paths = append(paths, r.(map[string]any)["path"].(string))
	}
	if !strings.Contains(strings.Join(paths, " "), "/models/{repo}/tensors/{name}") {
		t.Errorf("root routes: %v", paths)
	}

	resp, body = e.Do(http.MethodGet, "/", "Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!bytes.Contains(body, []byte("hubproxy 1.2.3")) || !bytes.Contains(body, []byte("/openapi.yaml")) {
		t.Errorf("GET / (browser): %d %s %.300s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	resp, body = e.Do(http.MethodGet, "/openapi.yaml")
	want, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) || resp.Header.Get("Content-Type") != "application/yaml" {
		t.Errorf("/openapi.yaml: %d %s, %d bytes; want the %d bytes of api/openapi.yaml", resp.StatusCode, resp.Header.Get("Content-Type"), len(body), len(want))
	}
}

// With client tokens set, the root page (which lists what others are
// fetching) needs one like the content routes do; the contract stays open.
func TestRootNeedsAClientTokenWhenTokensAreSet(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("hf_team_a\n"), 0o600)
	e := newEnv(t, hubtest.Options{}, func(c *app.Config) { c.ClientTokensFile = tokens })
	if resp, _ := e.Do(http.MethodGet, "/"); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("X-Error-Code") != "TokenRequired" {
		t.Errorf("GET / without a token: %d %q, want 401 TokenRequired", resp.StatusCode, resp.Header.Get("X-Error-Code"))
	}
	if resp, _ := e.Do(http.MethodGet, "/", "Authorization", "Bearer hf_team_a"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET / with a listed token: %d", resp.StatusCode)
	}
	if resp, _ := e.Do(http.MethodGet, "/openapi.yaml"); resp.StatusCode != http.StatusOK {
		t.Errorf("/openapi.yaml without a token: %d, want 200", resp.StatusCode)
	}
}

// A file being sent is listed on the root page while it is in flight, with
// its caller's kind and its bytes so far, and gone once it is done.
func TestRootListsTransfersInFlight(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := hubtest.RandomBytes(81, 1<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "w.bin", Data: data}}})
	e.Hub.GrantToken("hf_reader")
	e.Hub.SetFaults(hubtest.Faults{StallBody: hubtest.Fault{N: 1}, CutAt: 256 << 10, StallFor: 8 * time.Second})

	const file = "/org/model/resolve/main/w.bin"
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		req, _ := http.NewRequest(http.MethodGet, e.Proxy.URL+file, nil)
		req.Header.Set("Authorization", "Bearer hf_reader")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	inFlight := func() (n float64, page []byte) {
		_, body := e.Do(http.MethodGet, "/")
		var v struct {
			InFlight struct{ Transfers float64 } `json:"in_flight"`
		}
		json.Unmarshal(body, &v)
		return v.InFlight.Transfers, body
	}
	var page []byte
	testutil.Eventually(t, 5*time.Second, "the transfer counted on the root page", func() bool {
		var n float64
		n, page = inFlight()
		return n == 1
	})
	// The root page is public: it never says which file, since a path
	// names a repo whose existence may be the Hub's to hide.
	if bytes.Contains(page, []byte("w.bin")) {
		t.Errorf("the root page names the file in flight: %s", page)
	}
	if _, html := e.Do(http.MethodGet, "/", "Accept", "text/html"); bytes.Contains(html, []byte("hf_reader")) || bytes.Contains(html, []byte("w.bin")) {
		t.Error("the root page shows the caller's token or the file")
	}
	// The admin listener, the operator's, lists it.
	adm := httptest.NewServer(e.Admin)
	defer adm.Close()
	var seen map[string]any
	testutil.Eventually(t, 5*time.Second, "the transfer on the admin listener", func() bool {
		var v struct{ Transfers []map[string]any }
		if err := json.Unmarshal(getBody(t, adm.URL+"/transfers"), &v); err != nil {
			return false
		}
		for _, tr := range v.Transfers {
			if tr["path"] == file {
				seen = tr
				return true
			}
		}
		return false
	})
	if id, _ := seen["id"].(string); seen["caller"] != "token" || seen["method"] != "GET" || id == "" {
		t.Errorf("transfer listed as %v", seen)
	}
	if _, ok := seen["bytes"].(float64); !ok {
		t.Errorf("transfer without a byte count: %v", seen)
	}
	wg.Wait()
	// The handler deregisters when it returns, which may be a moment after
	// the client has read the last byte.
	testutil.Eventually(t, 5*time.Second, "no transfer once the response ended", func() bool {
		n, _ := inFlight()
		return n == 0
	})
}

// Each request line says who asked for what: the query (credentials
// redacted), the peer, the first hop of X-Forwarded-For and the user agent.
func TestAccessLogSaysWhoAskedForWhat(t *testing.T) {
	h := hubtest.NewT(t, hubtest.Options{})
	h.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{{Path: "config.json", Data: []byte(`{}`)}}})
	var logs syncBuffer
	built, err := app.Build(app.Config{Upstream: h.URL, CacheDir: t.TempDir(), BlockSize: blockSize},
		slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(built.Main)
	defer func() { srv.Close(); built.Close() }()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/org/model/resolve/main/config.json?download=true&token=s3cr3tvalue", nil)
	req.Header.Set("User-Agent", "huggingface_hub/0.30.0; python/3.12")
	req.Header.Set("X-Forwarded-For", "203.0.113.7, 10.0.0.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var line map[string]any
	testutil.Eventually(t, 5*time.Second, "the request line", func() bool {
		if l := requestLines(&logs); len(l) > 0 {
			line = l[0]
			return true
		}
		return false
	})
	if q, _ := line["query"].(string); !strings.Contains(q, "download=true") || !strings.Contains(q, "token=REDACTED") {
		t.Errorf("query %q, want download=true and the token redacted", line["query"])
	}
	if c, _ := line["client"].(string); !strings.HasPrefix(c, "127.0.0.1:") {
		t.Errorf("client %q, want the peer address", line["client"])
	}
	if line["forwarded_for"] != "203.0.113.7" {
		t.Errorf("forwarded_for %q, want the first hop", line["forwarded_for"])
	}
	if line["user_agent"] != "huggingface_hub/0.30.0; python/3.12" {
		t.Errorf("user_agent %q", line["user_agent"])
	}
	if all, _ := json.Marshal(requestLines(&logs)); bytes.Contains(all, []byte("s3cr3tvalue")) {
		t.Error("the log shows the token")
	}
}

func getBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}
