package app_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

func TestMetricsAndReadiness(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{
		{Path: "model.safetensors", Data: hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "F32", Shape: []int64{1024}}}, nil)},
	}})
	e.Do(http.MethodGet, "/org/model/resolve/main/model.safetensors") // miss
	e.Do(http.MethodGet, "/org/model/resolve/main/model.safetensors") // hit
	e.Do(http.MethodGet, "/models/org/model/tensors")
	e.Do(http.MethodGet, "/org/model/resolve/main/nope.bin")

	resp, body := e.Do(http.MethodGet, "/metrics")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	text := string(body)
	for _, want := range []string{
		`hubproxy_http_requests_total{code="200",route="resolve"} 2`,
		`hubproxy_http_requests_total{code="404",route="resolve"} 1`,
		`hubproxy_http_requests_total{code="200",route="tensor"} 1`,
		`hubproxy_cache_requests_total{result="hit"} 1`,
		`hubproxy_cache_requests_total{result="miss"} 1`,
		`hubproxy_safetensors_headers_total{result="parsed"} 1`,
		`hubproxy_upstream_requests_total{code="206",kind="range"}`,
		`hubproxy_cache_blobs 1`,
		`hubproxy_cache_fills_in_flight 0`,
		`hubproxy_cache_max_bytes 0`, // unlimited in this test's config
		`hubproxy_cache_free_bytes `,
		`hubproxy_cache_min_free_bytes `,
		`hubproxy_cache_fill_errors_total{reason="network"} 0`,
		`hubproxy_build_info{commit="",go_version="go`,
		`hubproxy_upstream_up 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, secret := range []string{"org/model", "model.safetensors"} {
		if strings.Contains(text, secret) {
			t.Errorf("/metrics mentions %q: labels must stay low-cardinality", secret)
		}
	}

	if resp, body := e.Do(http.MethodGet, "/readyz"); resp.StatusCode != 200 || !strings.Contains(string(body), `"upstream":"up"`) {
		t.Errorf("/readyz with upstream up: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.Do(http.MethodGet, "/healthz"); resp.StatusCode != 200 {
		t.Errorf("/healthz: %d", resp.StatusCode)
	}
	e.Cfg.Offline = true
	e.Start()
	if resp, body := e.Do(http.MethodGet, "/readyz"); resp.StatusCode != 200 || !strings.Contains(string(body), `"upstream":"offline"`) {
		t.Errorf("/readyz offline: %d %s", resp.StatusCode, body)
	}
}

// Readiness means "can serve". With the hub down, cached files are still
// served, so /readyz stays 200 (a failing probe would take every proxy, and
// every sidecar's inference pod, out of service exactly when the cache
// matters most); the upstream's state is in the body and in
// hubproxy_upstream_up. A cache that cannot be written is not ready.
func TestReadinessIgnoresUpstreamOutages(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := hubtest.RandomBytes(3, 200<<10)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "w.bin", Data: data}}})
	if resp, _ := e.Do(http.MethodGet, "/org/model/resolve/main/w.bin"); resp.StatusCode != 200 {
		t.Fatalf("fill: %d", resp.StatusCode)
	}
	e.Hub.Close()
	e.Start() // a fresh proxy: it learns the outage from its own probe
	resp, body := e.Do(http.MethodGet, "/readyz")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"upstream":"down"`) || !strings.Contains(string(body), `"ready":true`) {
		t.Errorf("/readyz with the hub down: %d %s", resp.StatusCode, body)
	}
	if resp, got := e.Do(http.MethodGet, "/org/model/resolve/main/w.bin"); resp.StatusCode != 200 || !bytes.Equal(got, data) {
		t.Errorf("cached file with the hub down: %d, %d bytes", resp.StatusCode, len(got))
	}
	if _, m := e.Do(http.MethodGet, "/metrics"); !strings.Contains(string(m), "hubproxy_upstream_up 0") {
		t.Error("/metrics lacks hubproxy_upstream_up 0")
	}
	if err := os.Chmod(filepath.Join(e.Dir, ".hubproxy", "tmp"), 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(filepath.Join(e.Dir, ".hubproxy", "tmp"), 0o755)
	if os.Geteuid() == 0 {
		t.Log("running as root: permissions do not stop writes; checking a missing directory instead")
		os.Rename(filepath.Join(e.Dir, ".hubproxy", "tmp"), filepath.Join(e.Dir, ".hubproxy", "tmp-gone"))
		defer os.Rename(filepath.Join(e.Dir, ".hubproxy", "tmp-gone"), filepath.Join(e.Dir, ".hubproxy", "tmp"))
	}
	if resp, body := e.Do(http.MethodGet, "/readyz"); resp.StatusCode != 503 || !strings.Contains(string(body), "not writable") {
		t.Errorf("/readyz with an unwritable cache: %d %s", resp.StatusCode, body)
	}
}
