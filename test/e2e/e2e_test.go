package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// clientTimeout bounds one run of client.mjs. A run takes a few seconds; the
// bound only turns a hang into a clear failure.
const clientTimeout = 40 * time.Second

// hubtestLogCap is the size of hubtest's request log ring; a log that long
// may have dropped records.
const hubtestLogCap = 10000

// TestHubJSClient runs the published @huggingface/hub client against a
// hubproxy that fronts the fake hub, twice: once cold, once warm. client.mjs
// checks what the library returns; this test checks what reached the hub.
func TestHubJSClient(t *testing.T) {
	node := requireNode(t)
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ensureNodeModules(ctx, t, dir)

	// The hub sends Xet signals by default (XetHeaders nil), as huggingface.co
	// does: the proxy must strip them or the client leaves for the CAS server.
	h := hubtest.NewT(t, hubtest.Options{PageSize: treePageSize})

	var exp expectations
	for _, f := range []repoFixture{bigRepo(), singleRepo(), prRevision(), shardedRepo(), datasetRepo()} {
		exp.Repos = append(exp.Repos, f.install(t, h))
	}
	expectPath := filepath.Join(t.TempDir(), "expect.json")
	if err := exp.write(expectPath); err != nil {
		t.Fatal(err)
	}

	upstream := &recordingTransport{next: upstreamTransport()}
	proxyURL := startProxy(t, h.URL, upstream)

	runClient(ctx, t, node, dir, proxyURL, expectPath, "run1")
	checked := checkOnlyProxyReachedHub(t, h, upstream, 0)
	cold := h.Counters()
	if cold.BodyBytes == 0 {
		t.Fatalf("the cold run moved no file bytes upstream: the hub's counters are not wired, so the warm check would prove nothing")
	}
	checkFetchedOnce(t, exp, cold.BytesByPath)

	runClient(ctx, t, node, dir, proxyURL, expectPath, "run2")
	checkOnlyProxyReachedHub(t, h, upstream, checked)
	warm := h.Counters()
	if d := warm.BodyBytes - cold.BodyBytes; d != 0 {
		t.Errorf("warm run: %d upstream body bytes, want 0 (every file was downloaded whole by the cold run); per file: %v",
			d, diffBytes(cold.BytesByPath, warm.BytesByPath))
	}
	if d := warm.CDNRequests - cold.CDNRequests; d != 0 {
		t.Errorf("warm run: %d CDN requests, want 0", d)
	}
	t.Logf("hub, cold run: %d requests (%d resolve, %d CDN, %d API), %d body bytes",
		cold.Requests, cold.ResolveRequests, cold.CDNRequests, cold.APIRequests, cold.BodyBytes)
	t.Logf("hub, warm run: %d requests (%d resolve, %d CDN, %d API), %d body bytes",
		warm.Requests-cold.Requests, warm.ResolveRequests-cold.ResolveRequests,
		warm.CDNRequests-cold.CDNRequests, warm.APIRequests-cold.APIRequests, warm.BodyBytes-cold.BodyBytes)
}

// startProxy runs hubproxy in-process in front of upstream, with a fresh
// cache, and returns its base URL.
func startProxy(t *testing.T, upstream string, transport http.RoundTripper) string {
	t.Helper()
	cfg := app.Defaults()
	cfg.Upstream = upstream
	cfg.CacheDir = t.TempDir()
	cfg.Transport = transport
	cfg.MinFreeBytes = 0 // the test must not depend on the machine's free disk
	log := slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	built, err := app.Build(cfg, log)
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	srv := httptest.NewServer(built.Main)
	t.Cleanup(func() {
		srv.Close()
		if err := built.Close(); err != nil {
			t.Errorf("hubproxy cleanup: %v", err)
		}
	})
	return srv.URL
}

// runClient runs client.mjs once and fails the test if any check failed.
func runClient(ctx context.Context, t *testing.T, node, dir, proxyURL, expectPath, label string) {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(ctx, clientTimeout,
		fmt.Errorf("client.mjs %s ran longer than %v", label, clientTimeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"HUBPROXY_URL="+proxyURL,
		"E2E_EXPECT="+expectPath,
		"E2E_RUN="+label,
	)
	start := time.Now()
	if err := runStreaming(ctx, t, cmd, "node"); err != nil {
		t.Fatalf("client.mjs %s failed after %v: %v (its output is above)", label, time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("client.mjs %s passed in %v", label, time.Since(start).Round(time.Millisecond))
}

// checkOnlyProxyReachedHub proves that nothing but the proxy talked to the
// hub, its CDN or the foreign host: every request the fake hub logged must
// match one the proxy's upstream transport sent (client.mjs separately refuses
// to leave the proxy's origin). It also checks the Xet and credential rules.
// Records before index from were reported by an earlier call; it returns the
// log's length for the next one.
func checkOnlyProxyReachedHub(t *testing.T, h *hubtest.Hub, upstream *recordingTransport, from int) int {
	t.Helper()
	c := h.Counters()
	if c.XetRequests != 0 {
		t.Errorf("the hub answered %d Xet probes: the proxy forwarded the client's xet Accept header (docs/hub-protocol.md §2)", c.XetRequests)
	}
	if c.ForeignRequests != 0 || c.AuthSeenByCDN != 0 || c.AuthSeenByForeign != 0 {
		t.Errorf("foreign requests %d, auth seen by CDN %d, by foreign host %d; want 0, 0, 0",
			c.ForeignRequests, c.AuthSeenByCDN, c.AuthSeenByForeign)
	}

	sent := upstream.sent()
	log := h.Requests()
	if len(log) >= hubtestLogCap {
		t.Fatalf("the hub's request log is full (%d records): the bypass check would miss requests", len(log))
	}
	unmatched := 0
	for i, rec := range log {
		k := requestKey{rec.Host, rec.Method, rec.Path, rec.Query, rec.Range}
		if sent[k] > 0 {
			sent[k]--
		} else if i >= from {
			unmatched++
			if unmatched <= 10 {
				t.Errorf("the hub got %s http://%s%s?%s [Range %q] (status %d), which the proxy never sent: a client bypassed the proxy",
					rec.Method, rec.Host, rec.Path, rec.Query, rec.Range, rec.Status)
			}
		}
		if i >= from && strings.Contains(rec.Accept, "xet") {
			t.Errorf("the hub got Accept %q on %s %s: the proxy must send Accept: */*", rec.Accept, rec.Method, rec.Path)
		}
	}
	if unmatched > 10 {
		t.Errorf("... and %d more requests the proxy never sent", unmatched-10)
	}
	return len(log)
}

// checkFetchedOnce fails the test when the proxy pulled more bytes of a file
// from upstream than the file holds: the cold run reads every file (some in
// overlapping ranges, then whole), and each byte should cross the wire once.
func checkFetchedOnce(t *testing.T, exp expectations, byPath map[string]int64) {
	t.Helper()
	// Keys are "{repo}/{path}" as hubtest counts them; the same path at two
	// revisions holds different bytes, so its sizes add up.
	sizes := map[string]int64{}
	for _, r := range exp.Repos {
		repo := hub.MustRepo(hub.RepoType(r.Type), r.ID)
		for _, f := range r.Files {
			sizes[repo.String()+"/"+f.Path] += f.Size
		}
	}
	for key, got := range byPath {
		size, ok := sizes[key]
		switch {
		case !ok:
			t.Errorf("cold run: the hub served %d bytes of %q, which is no file of the fixture", got, key)
		case got > size:
			t.Errorf("cold run: the proxy fetched %d bytes of %s from upstream, but the file has %d: bytes were fetched twice",
				got, key, size)
		}
	}
}

func diffBytes(before, after map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// requestKey identifies a request as both the proxy's transport and the hub's
// log describe it.
type requestKey struct {
	host, method, path, query, rng string
}

// upstreamTransport mirrors the transport hubproxy builds for itself (no
// compression, many idle connections), without environment proxies: the fake
// hub is on loopback.
func upstreamTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConnsPerHost = 64
	tr.DisableCompression = true
	return tr
}

// recordingTransport is the proxy's upstream transport: it remembers every
// request the proxy sent, before sending it.
type recordingTransport struct {
	next http.RoundTripper

	mu    sync.Mutex
	count map[requestKey]int
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	k := requestKey{r.URL.Host, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Range")}
	if r.Host != "" {
		k.host = r.Host
	}
	rt.mu.Lock()
	if rt.count == nil {
		rt.count = map[requestKey]int{}
	}
	rt.count[k]++
	rt.mu.Unlock()
	return rt.next.RoundTrip(r)
}

// sent returns a copy of the per-request counts.
func (rt *recordingTransport) sent() map[requestKey]int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make(map[requestKey]int, len(rt.count))
	for k, v := range rt.count {
		out[k] = v
	}
	return out
}

// testWriter sends the proxy's log lines to t.Log until the test ends; lines
// from goroutines that outlive the test are dropped rather than panicking.
type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func newTestWriter(t *testing.T) io.Writer {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Logf("hubproxy: %s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
