package app_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// syncBuffer is a log destination safe for the handlers' goroutines.
type syncBuffer = testutil.SyncBuffer

// requestLines are the access log's request lines in logs (JSON).
func requestLines(logs *syncBuffer) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

// Request lines say what the cache held and what upstream sent for the
// request, durations are seconds, and probes and scrapes stay out of the
// info log.
func TestAccessLogLines(t *testing.T) {
	h := hubtest.NewT(t, hubtest.Options{})
	data := hubtest.RandomBytes(61, 300<<10)
	h.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{{Path: "w.bin", Data: data}}})
	var logs syncBuffer
	built, err := app.Build(app.Config{Upstream: h.URL, CacheDir: t.TempDir(), BlockSize: blockSize},
		slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(built.Main)
	defer func() { srv.Close(); built.Close() }()
	// One connection, bodies drained: each request is read only after the
	// previous handler (and its log line) finished, so once the last line
	// is in, every line is.
	const file = "/org/model/resolve/main/w.bin"
	for _, p := range []string{file, file, "/healthz", "/readyz", "/metrics", file} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A handler logs after its last byte went out: wait for the lines.
	var lines []map[string]any
	for range 500 {
		if lines = requestLines(&logs); len(lines) > 0 && lines[len(lines)-1]["cache"] == "hit" && len(lines) >= 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(lines) != 3 {
		t.Fatalf("%d request lines at info, want 3 (probes and scrapes at debug): %v", len(lines), lines)
	}
	cold, warm := lines[0], lines[1]
	if cold["cache"] != "miss" || cold["upstream_bytes"].(float64) < float64(len(data)) {
		t.Errorf("cold read logged %v", cold)
	}
	if warm["cache"] != "hit" || warm["upstream_bytes"].(float64) != 0 {
		t.Errorf("warm read logged %v", warm)
	}
	if _, ok := cold["duration_s"].(float64); !ok {
		t.Errorf("duration_s is not a number in seconds: %v", cold)
	}
}

// The router's own 404 and 405 answers take the shape of every other error,
// on the public and the admin listener alike.
func TestRouterErrorsAreJSON(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	admin := httptest.NewServer(e.Admin)
	defer admin.Close()
	for _, tc := range []struct {
		base, method, path string
		status             int
		code               string
	}{
		{e.Proxy.URL, http.MethodPost, "/org/model/resolve/main/x.bin", 405, "MethodNotAllowed"},
		{admin.URL, http.MethodGet, "/nope", 404, "EntryNotFound"},
		{admin.URL, http.MethodPut, "/gpu/stage", 405, "MethodNotAllowed"},
		{admin.URL, http.MethodPost, "/gpu/devices", 405, "MethodNotAllowed"},
	} {
		req, _ := http.NewRequest(tc.method, tc.base+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("X-Error-Code") != tc.code || err != nil || body["error"] == "" ||
			resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s: %d %q %v %v", tc.method, tc.path, resp.StatusCode, resp.Header.Get("X-Error-Code"), body, err)
		}
		if tc.status == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
	}
}
