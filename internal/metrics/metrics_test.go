package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
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
	m.RegisterGPU(reg, func() (int, int64) { return 0, 0 })
	m.ObserveStage(1<<20, 0.01)
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
	reg := prometheus.NewRegistry()
	m := New(reg)
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
	// Each request is timed once under the new name and once under the
	// deprecated one, so a dashboard gets the same figures from either.
	for _, name := range []string{"hubproxy_upstream_response_duration_seconds", "hubproxy_upstream_response_seconds"} {
		if got := histogramCount(t, reg, name, "api"); got != 2 {
			t.Errorf("%s{kind=api} count = %d, want 2", name, got)
		}
	}
}

// histogramCount is the sample count of reg's histogram name for kind.
func histogramCount(t *testing.T, reg prometheus.Gatherer, name, kind string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	t.Fatalf("no histogram %s{kind=%q}", name, kind)
	return 0
}

// TestGPUThroughputFromCounters: the staging throughput is the ratio of two
// counters' rates, bytes over seconds spent staging. A histogram of each
// request's rate cannot give it: one 1 GiB staging at 1 GiB/s and one at
// 4 GiB/s moved 2 GiB in 1.25 s, 1.6 GiB/s, not the 2.5 GiB/s their rates
// average to.
func TestGPUThroughputFromCounters(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	m.RegisterGPU(reg, func() (int, int64) { return 0, 0 })
	m.ObserveStage(1<<30, 1)
	m.ObserveStage(1<<30, 0.25)
	m.ObserveStage(1<<20, 0) // too fast for the clock: its bytes count, no time
	got := gathered(t, reg)
	bytes, secs := got["hubproxy_gpu_stage_bytes_total"], got["hubproxy_gpu_stage_seconds_total"]
	if bytes != 2<<30+1<<20 || secs != 1.25 {
		t.Fatalf("gpu_stage_bytes_total = %v, gpu_stage_seconds_total = %v; want %v and 1.25", bytes, secs, 2<<30+1<<20)
	}
	if tp := (bytes - 1<<20) / secs; tp != 1.6*(1<<30) {
		t.Errorf("throughput %v B/s, want 1.6 GiB/s", tp)
	}
	// The deprecated byte counter keeps the same count for its last release.
	if old := got["hubproxy_gpu_staged_bytes_total"]; old != bytes {
		t.Errorf("gpu_staged_bytes_total = %v, want %v like gpu_stage_bytes_total", old, bytes)
	}
}

// TestDeprecatedSeriesNameTheirReplacement: every series kept only for its
// last release says so first in its help text, and names a series that is
// exported, so whoever reads the help (or the README, which lists the same
// three) knows what to move to.
func TestDeprecatedSeriesNameTheirReplacement(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.RegisterGPU(reg, func() (int, int64) { return 0, 0 })
	m.ObserveStage(1, 1)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	var deprecated []string
	mentioned := regexp.MustCompile(`hubproxy_[a-z_]+`)
	for _, f := range families {
		help := f.GetHelp()
		if !strings.HasPrefix(help, "Deprecated, removed in the next release: ") {
			if strings.Contains(strings.ToLower(help), "deprecated") {
				t.Errorf("%s: help %q mentions deprecation but does not start with the deprecation notice", f.GetName(), help)
			}
			continue
		}
		deprecated = append(deprecated, f.GetName())
		refs := mentioned.FindAllString(help, -1)
		if len(refs) == 0 {
			t.Errorf("%s: help %q names no replacement", f.GetName(), help)
		}
		for _, r := range refs {
			if !names[r] || r == f.GetName() {
				t.Errorf("%s: help names %s, which is not another exported series", f.GetName(), r)
			}
		}
	}
	slices.Sort(deprecated)
	want := []string{"hubproxy_gpu_stage_throughput_bytes_per_second", "hubproxy_gpu_staged_bytes_total", "hubproxy_upstream_response_seconds"}
	if !slices.Equal(deprecated, want) {
		t.Errorf("deprecated series %v, want %v", deprecated, want)
	}
}

// gathered is every counter and gauge of reg without labels, by name.
func gathered(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) > 0 {
				continue
			}
			switch {
			case m.Counter != nil:
				out[f.GetName()] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[f.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestREADMEListsEveryMetric: every series this package exports is in the
// README's Metrics section (under its name less hubproxy_), the deprecated
// ones in its deprecated table, so an operator reading it sees what a scrape
// shows.
func TestREADMEListsEveryMetric(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "\n## Metrics\n")
	if start < 0 {
		t.Fatal("README.md has no Metrics section")
	}
	section = section[start+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	// The deprecated table follows the main one; a name in its "use instead"
	// column must not count as listed.
	mainTable, deprecatedTable := section, ""
	if i := strings.Index(section, "\nDeprecated, removed in the next release"); i >= 0 {
		mainTable, deprecatedTable = section[:i], section[i:]
	}

	reg := prometheus.NewRegistry()
	m := New(reg)
	RegisterStore(reg, func() cache.Stats { return cache.Stats{} })
	m.RegisterGPU(reg, func() (int, int64) { return 0, 0 })
	RegisterGPUDevices(reg, func() []GPUDevice { return []GPUDevice{{UUID: "GPU-0"}} })
	RegisterSharedStore(reg, func() bool { return true })
	RegisterUpstream(reg, func() bool { return true })
	RegisterBuildInfo(reg, "v", "c", "go")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		name := "`" + strings.TrimPrefix(f.GetName(), namespace+"_") + "`"
		table := mainTable
		if strings.HasPrefix(f.GetHelp(), "Deprecated") {
			table = deprecatedTable
		}
		if !strings.Contains(table, name) {
			t.Errorf("README.md's Metrics section does not list %s (help: %q)", name, f.GetHelp())
		}
	}
}
