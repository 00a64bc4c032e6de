package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

func TestMetricsAndReadiness(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	e.hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID, Files: []hubtest.File{
		{Path: "model.safetensors", Data: hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "F32", Shape: []int64{1024}}}, nil)},
	}})
	e.do(http.MethodGet, "/org/model/resolve/main/model.safetensors") // miss
	e.do(http.MethodGet, "/org/model/resolve/main/model.safetensors") // hit
	e.do(http.MethodGet, "/models/org/model/tensors")
	e.do(http.MethodGet, "/org/model/resolve/main/nope.bin")

	resp, body := e.do(http.MethodGet, "/metrics")
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

	if resp, _ := e.do(http.MethodGet, "/readyz"); resp.StatusCode != 200 {
		t.Errorf("/readyz with upstream up: %d", resp.StatusCode)
	}
	e.hub.Close()
	e.start() // a fresh proxy has no remembered probe
	if resp, body := e.do(http.MethodGet, "/readyz"); resp.StatusCode != 503 || !strings.Contains(string(body), "upstream") {
		t.Errorf("/readyz with upstream down: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.do(http.MethodGet, "/healthz"); resp.StatusCode != 200 {
		t.Errorf("/healthz: %d", resp.StatusCode)
	}
	e.cfg.Offline = true
	e.start()
	if resp, _ := e.do(http.MethodGet, "/readyz"); resp.StatusCode != 200 {
		t.Errorf("/readyz offline: %d", resp.StatusCode)
	}
}
