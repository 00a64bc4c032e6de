// Package metrics defines hubproxy's Prometheus metrics. Everything is
// registered on the Registerer given to New, never in init(), so tests and
// embedders get their own registry. Labels are low-cardinality by rule: route
// classes, status codes and result kinds, never repo or file names.
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hubproxy/hubproxy/internal/cache"
)

const namespace = "hubproxy"

// Metrics holds the collectors the other packages update.
type Metrics struct {
	Requests        *prometheus.CounterVec   // route, code
	RequestDuration *prometheus.HistogramVec // route
	CacheRequests   *prometheus.CounterVec   // result: hit, partial, miss
	CacheBytes      *prometheus.CounterVec   // result
	Upstream        *prometheus.CounterVec   // kind, code
	UpstreamBytes   *prometheus.CounterVec   // kind
	UpstreamErrors  *prometheus.CounterVec   // kind
	UpstreamLatency *prometheus.HistogramVec // kind: time to response headers
	HeaderParses    *prometheus.CounterVec   // result: parsed, cached, invalid
	AccessDecisions *prometheus.CounterVec   // decision: allowed, denied, unverifiable
	CacheBypass     prometheus.Counter       // reads served past a failing cache
	FillErrors      *prometheus.CounterVec   // reason

	// UpstreamLatencyOld is the same histogram under its former name,
	// upstream_response_seconds, kept one release so dashboards can move
	// to the new name; removed in the next release.
	UpstreamLatencyOld *prometheus.HistogramVec

	gpu *gpuMetrics // set by RegisterGPU
}

// Route classes, cache results and upstream kinds: the only label values.
var (
	RouteClasses  = []string{"resolve", "raw", "api", "tensor", "health", "metrics", "other"}
	CacheResults  = []string{"hit", "partial", "miss"}
	UpstreamKinds = []string{"resolve", "range", "api"}
	ParseResults  = []string{"parsed", "cached", "invalid"}
	Decisions     = []string{"allowed", "denied", "unverifiable"}
	// FillErrorReasons say why a cache fill ended early: the upstream
	// answered an error status, the network failed (reset, stall,
	// timeout), the answer broke the protocol (a wrong range, another
	// file), the body ended short or ran long, the disk refused the bytes,
	// or something else.
	FillErrorReasons = []string{"status", "network", "protocol", "short_body", "storage", "other"}
)

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	// 5 ms to about 33 s, for the renamed upstream histogram and its
	// deprecated twin alike, so both give the same quantiles.
	upstreamLatencyBuckets := prometheus.ExponentialBuckets(0.005, 3, 9)
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "http_requests_total",
			Help: "HTTP requests served, by route class and status code.",
		}, []string{"route", "code"}),
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, body included, by route class.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"route"}),
		CacheRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "cache_requests_total",
			Help: "File and tensor reads by what the cache held of the requested bytes: hit (all), partial (some), miss (none).",
		}, []string{"result"}),
		CacheBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "cache_requested_bytes_total",
			Help: "Bytes requested from the cache, by what it held of the request (hit, partial, miss).",
		}, []string{"result"}),
		Upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "upstream_requests_total",
			Help: "Requests sent upstream, by kind (resolve, range, api) and status code (0 for transport errors).",
		}, []string{"kind", "code"}),
		UpstreamBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "upstream_received_bytes_total",
			Help: "Response body bytes received from upstream, by kind.",
		}, []string{"kind"}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "upstream_errors_total",
			Help: "Upstream requests that failed in transport or answered 5xx or 429, by kind.",
		}, []string{"kind"}),
		UpstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "upstream_response_duration_seconds",
			Help:    "Time from sending an upstream request to its response headers, by kind.",
			Buckets: upstreamLatencyBuckets,
		}, []string{"kind"}),
		UpstreamLatencyOld: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "upstream_response_seconds",
			Help:    "Deprecated, removed in the next release: use hubproxy_upstream_response_duration_seconds (the same histogram).",
			Buckets: upstreamLatencyBuckets,
		}, []string{"kind"}),
		HeaderParses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "safetensors_headers_total",
			Help: "Safetensors headers needed, by result: parsed from upstream bytes, found in the header cache, or invalid.",
		}, []string{"result"}),
		AccessDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "access_decisions_total",
			Help: "Access checks by outcome: allowed or denied by upstream, or unverifiable (upstream down, repo not known public: refused).",
		}, []string{"decision"}),
		CacheBypass: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "cache_bypass_total",
			Help: "Reads served straight from upstream because the cache could not store them (disk full, I/O error).",
		}),
		FillErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "cache_fill_errors_total",
			Help: "Cache fills that ended early with an error, by reason (status, network, protocol, short_body, storage, other).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.Requests, m.RequestDuration, m.CacheRequests, m.CacheBytes,
		m.Upstream, m.UpstreamBytes, m.UpstreamErrors, m.UpstreamLatency, m.UpstreamLatencyOld, m.HeaderParses,
		m.AccessDecisions, m.CacheBypass, m.FillErrors)
	// Pre-seed every label value so dashboards see zeros, not gaps.
	for _, r := range RouteClasses {
		m.RequestDuration.WithLabelValues(r)
	}
	for _, r := range CacheResults {
		m.CacheRequests.WithLabelValues(r)
		m.CacheBytes.WithLabelValues(r)
	}
	for _, k := range UpstreamKinds {
		m.UpstreamBytes.WithLabelValues(k)
		m.UpstreamErrors.WithLabelValues(k)
		m.UpstreamLatency.WithLabelValues(k)
		m.UpstreamLatencyOld.WithLabelValues(k)
	}
	for _, r := range ParseResults {
		m.HeaderParses.WithLabelValues(r)
	}
	for _, d := range Decisions {
		m.AccessDecisions.WithLabelValues(d)
	}
	for _, r := range FillErrorReasons {
		m.FillErrors.WithLabelValues(r)
	}
	return m
}

// ObserveFillError records one failed fill; reason is one of
// FillErrorReasons.
func (m *Metrics) ObserveFillError(reason string) {
	if m != nil {
		m.FillErrors.WithLabelValues(reason).Inc()
	}
}

// RegisterBuildInfo exposes hubproxy_build_info{version, commit,
// go_version} = 1, so dashboards can tell which build each pod runs.
func RegisterBuildInfo(reg prometheus.Registerer, version, commit, goVersion string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "Always 1; the labels say which build is running."}, []string{"version", "commit", "go_version"})
	g.WithLabelValues(version, commit, goVersion).Set(1)
	reg.MustRegister(g)
}

// ObserveRequest records one served request.
func (m *Metrics) ObserveRequest(route string, code int, seconds float64) {
	if m == nil {
		return
	}
	m.Requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.RequestDuration.WithLabelValues(route).Observe(seconds)
}

// ObserveCache records what the cache held of a read of want bytes.
func (m *Metrics) ObserveCache(present, want int64) {
	if m == nil || want <= 0 {
		return
	}
	result := "partial"
	switch {
	case present >= want:
		result = "hit"
	case present <= 0:
		result = "miss"
	}
	m.CacheRequests.WithLabelValues(result).Inc()
	m.CacheBytes.WithLabelValues(result).Add(float64(want))
}

// ObserveAccess records one access decision.
func (m *Metrics) ObserveAccess(decision string) {
	if m != nil {
		m.AccessDecisions.WithLabelValues(decision).Inc()
	}
}

// ObserveHeader records one safetensors header lookup.
func (m *Metrics) ObserveHeader(result string) {
	if m != nil {
		m.HeaderParses.WithLabelValues(result).Inc()
	}
}

// RegisterStore exposes the cache's own counters and gauges, read from stats
// at each scrape, so no package has to push them.
func RegisterStore(reg prometheus.Registerer, stats func() cache.Stats) {
	gauge := func(name, help string, f func(cache.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help},
			func() float64 { return f(stats()) })
	}
	counter := func(name, help string, f func(cache.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help},
			func() float64 { return f(stats()) })
	}
	reg.MustRegister(
		gauge("cache_max_bytes", "The cache's size budget (cache-max-bytes); 0 means unlimited.", func(s cache.Stats) float64 { return float64(s.MaxBytes) }),
		gauge("cache_min_free_bytes", "The free-space floor eviction keeps on the cache's filesystem (cache-min-free-bytes).", func(s cache.Stats) float64 { return float64(s.MinFreeBytes) }),
		gauge("cache_free_bytes", "Free bytes on the cache's filesystem now (-1 if unknown).", func(s cache.Stats) float64 { return float64(s.FreeBytes) }),
		gauge("cache_blob_bytes", "Bytes of complete, verified blobs in the cache.", func(s cache.Stats) float64 { return float64(s.BlobBytes) }),
		gauge("cache_partial_bytes", "Bytes present in partially filled files.", func(s cache.Stats) float64 { return float64(s.PartialBytes) }),
		gauge("cache_blobs", "Complete, verified blobs in the cache.", func(s cache.Stats) float64 { return float64(s.Blobs) }),
		gauge("cache_partials", "Partially filled files in the cache.", func(s cache.Stats) float64 { return float64(s.Partials) }),
		gauge("cache_fills_in_flight", "Upstream range requests cache fills are running now.", func(s cache.Stats) float64 { return float64(s.FillsInFlight) }),
		gauge("cache_waiters", "Readers waiting now for bytes another request is fetching (single-flight waiters).", func(s cache.Stats) float64 { return float64(s.Waiters) }),
		gauge("cache_files_in_use", "Cached files with open readers, fills in flight or promotion running.", func(s cache.Stats) float64 { return float64(s.InUse) }),
		counter("cache_evictions_total", "Files evicted to stay under the size budget or free-space floor.", func(s cache.Stats) float64 { return float64(s.Evictions) }),
		counter("cache_fill_requests_total", "Upstream range requests made by cache fills.", func(s cache.Stats) float64 { return float64(s.FillRequests) }),
		counter("cache_fill_bytes_total", "Bytes requested upstream by cache fills.", func(s cache.Stats) float64 { return float64(s.FillBytes) }),
		counter("cache_promotions_total", "Partial files verified and promoted to blobs.", func(s cache.Stats) float64 { return float64(s.Promotions) }),
		counter("cache_verify_failures_total", "Partial files discarded because their hash did not match.", func(s cache.Stats) float64 { return float64(s.VerifyFailures) }),
	)
}

// GPU metrics are created on demand by RegisterGPU; ObserveStage is a no-op
// before that.
type gpuMetrics struct {
	// stageBytes and stageSeconds are the pair whose rates divide into the
	// staging throughput: rate(bytes) / rate(seconds) over any window is the
	// bytes per second of staging time, weighted by time as a mean of rates
	// never is, and sums across pods.
	stageBytes   prometheus.Counter
	stageSeconds prometheus.Counter
	stageSecs    prometheus.Histogram
	// Deprecated, removed in the next release: stagedBytes is stageBytes
	// under its former name; throughput is a histogram of per-request
	// rates, which no aggregation turns into a throughput.
	stagedBytes prometheus.Counter
	throughput  prometheus.Histogram
}

// RegisterGPU exposes GPU staging: bytes staged and time spent staging
// (counters whose rates divide into the throughput), the staging time of
// each request, and, read at scrape time from leases, the live leases and the
// device bytes they hold.
func (m *Metrics) RegisterGPU(reg prometheus.Registerer, leases func() (count int, bytes int64)) {
	g := &gpuMetrics{
		stageBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "gpu_stage_bytes_total",
			Help: "Bytes copied onto GPUs by successful staging requests; rate() of it over rate() of hubproxy_gpu_stage_seconds_total is the staging throughput."}),
		stageSeconds: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "gpu_stage_seconds_total",
			Help: "Wall time spent in successful staging requests, reads from the cache included, summed over requests."}),
		stageSecs: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "gpu_stage_seconds",
			Help: "Wall time of one staging request, reads from the cache included.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		stagedBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "gpu_staged_bytes_total",
			Help: "Deprecated, removed in the next release: use hubproxy_gpu_stage_bytes_total (the same count)."}),
		throughput: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "gpu_stage_throughput_bytes_per_second",
			Help:    "Deprecated, removed in the next release: a histogram of per-request rates; use rate(hubproxy_gpu_stage_bytes_total) / rate(hubproxy_gpu_stage_seconds_total).",
			Buckets: []float64{1e8, 5e8, 1e9, 2e9, 5e9, 1e10, 1.5e10, 2e10, 2.5e10, 3.5e10, 5e10}}),
	}
	reg.MustRegister(g.stageBytes, g.stageSeconds, g.stageSecs, g.stagedBytes, g.throughput,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "gpu_leases",
			Help: "Live GPU leases."}, func() float64 { n, _ := leases(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "gpu_leased_bytes",
			Help: "Device bytes held by live GPU leases."}, func() float64 { _, b := leases(); return float64(b) }),
	)
	m.gpu = g
}

// ObserveStage records one successful staging.
func (m *Metrics) ObserveStage(bytes int64, seconds float64) {
	if m == nil || m.gpu == nil {
		return
	}
	m.gpu.stageBytes.Add(float64(bytes))
	m.gpu.stagedBytes.Add(float64(bytes))
	if seconds > 0 {
		// A clock that went backwards gives no negative time: a counter
		// only grows.
		m.gpu.stageSeconds.Add(seconds)
		m.gpu.throughput.Observe(float64(bytes) / seconds)
	}
	m.gpu.stageSecs.Observe(seconds)
}

// RegisterUpstream exposes whether the upstream is answering (1) or marked
// down after calls to it got no answer (0), read from up at each scrape.
// Readiness does not depend on it: cached content is served either way.
func RegisterUpstream(reg prometheus.Registerer, up func() bool) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "upstream_up",
		Help: "1 while the upstream answers, 0 while it is marked down and the cache answers alone."},
		func() float64 {
			if up() {
				return 1
			}
			return 0
		}))
}
