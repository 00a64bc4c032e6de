package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hubproxy/hubproxy/internal/cache"
)

func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	RegisterStore(reg, func() cache.Stats { return cache.Stats{BlobBytes: 7} })
	m.ObserveRequest("resolve", 200, 0.01)
	m.ObserveCache(10, 10)
	m.ObserveHeader("parsed")
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	if got := testutil.ToFloat64(m.CacheRequests.WithLabelValues("hit")); got != 1 {
		t.Errorf("hit count %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "hubproxy_cache_blob_bytes"); err != nil || n != 1 {
		t.Errorf("store gauge: %d, %v", n, err)
	}
}

func TestObserveCacheClassifies(t *testing.T) {
	m := New(prometheus.NewRegistry())
	m.ObserveCache(0, 100)
	m.ObserveCache(50, 100)
	m.ObserveCache(100, 100)
	m.ObserveCache(0, 0) // nothing requested: not counted
	for result, want := range map[string]float64{"miss": 1, "partial": 1, "hit": 1} {
		if got := testutil.ToFloat64(m.CacheRequests.WithLabelValues(result)); got != want {
			t.Errorf("%s = %v, want %v", result, got, want)
		}
	}
	if got := testutil.ToFloat64(m.CacheBytes.WithLabelValues("partial")); got != 100 {
		t.Errorf("partial bytes %v", got)
	}
}

func TestTransportCountsByKind(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/fail") {
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	m := New(prometheus.NewRegistry())
	c := &http.Client{Transport: m.Transport(http.DefaultTransport)}
	get := func(path, rng string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get("/org/m/resolve/main/x", "")
	get("/blobs/abc", "bytes=0-4")
	get("/api/models/org/m", "")
	get("/api/models/org/m/fail", "")
	for k, want := range map[string]float64{"resolve": 5, "range": 5, "api": 5} {
		if got := testutil.ToFloat64(m.UpstreamBytes.WithLabelValues(k)); got != want {
			t.Errorf("%s bytes = %v, want %v", k, got, want)
		}
	}
	if got := testutil.ToFloat64(m.UpstreamErrors.WithLabelValues("api")); got != 1 {
		t.Errorf("api errors = %v", got)
	}
	if got := testutil.ToFloat64(m.Upstream.WithLabelValues("api", "503")); got != 1 {
		t.Errorf("api 503 = %v", got)
	}
}
