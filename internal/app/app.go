// Package app is hubproxy's composition root: it builds every part from one
// typed Config and returns the HTTP handler plus a cleanup function. Nothing
// else wires packages together, and nothing here reads flags or the
// environment (that is cmd/hubproxy's job).
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/dirhub"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/metrics"
	"github.com/hubproxy/hubproxy/internal/resolver"
	"github.com/hubproxy/hubproxy/internal/server"
)

// Config is everything hubproxy serve needs. Zero values mean the defaults
// documented in configs/hubproxy.yaml (applied by Defaults).
type Config struct {
	Listen        string        `mapstructure:"listen"`
	Upstream      string        `mapstructure:"upstream"`
	UpstreamToken string        `mapstructure:"upstream-token"`
	RedirectHosts []string      `mapstructure:"redirect-hosts"`
	PublicURL     string        `mapstructure:"public-url"`
	Offline       bool          `mapstructure:"offline"`
	CacheDir      string        `mapstructure:"cache-dir"`
	CacheMaxBytes int64         `mapstructure:"cache-max-bytes"`
	MinFreeBytes  int64         `mapstructure:"cache-min-free-bytes"`
	BlockSize     int64         `mapstructure:"block-size"`
	ChunkSize     int64         `mapstructure:"chunk-size"`
	ReadAhead     int           `mapstructure:"read-ahead"`
	UpstreamConns int           `mapstructure:"upstream-parallelism"`
	RevisionTTL   time.Duration `mapstructure:"revision-ttl"`
	AccessTTL     time.Duration `mapstructure:"access-ttl"`
	URLTTL        time.Duration `mapstructure:"url-ttl"`
	FillTimeout   time.Duration `mapstructure:"fill-timeout"`
	StallTimeout  time.Duration `mapstructure:"stall-timeout"`
	LogLevel      string        `mapstructure:"log-level"`
	LogFormat     string        `mapstructure:"log-format"`

	// GPU staging (admin API).
	AdminListen          string        `mapstructure:"admin-listen"`
	GPUDriverPath        string        `mapstructure:"gpu-driver-path"`
	GPULeaseTTL          time.Duration `mapstructure:"gpu-lease-ttl"`
	GPUDeviceBudgetBytes int64         `mapstructure:"gpu-device-budget-bytes"`

	// Transport overrides the upstream HTTP transport (tests).
	Transport http.RoundTripper `mapstructure:"-"`
	// Stager overrides the GPU copier (tests).
	Stager server.Stager `mapstructure:"-"`
}

// Defaults returns the configuration hubproxy serve runs with when nothing is
// set. cmd/hubproxy seeds its flags from it, so the two never disagree.
func Defaults() Config {
	return Config{
		Listen:        ":8080",
		Upstream:      "https://huggingface.co",
		CacheMaxBytes: 100 << 30,
		MinFreeBytes:  1 << 30,
		BlockSize:     64 << 10,
		ChunkSize:     8 << 20,
		ReadAhead:     4,
		UpstreamConns: 16,
		RevisionTTL:   30 * time.Second,
		AccessTTL:     time.Minute,
		URLTTL:        30 * time.Minute,
		FillTimeout:   5 * time.Minute,
		StallTimeout:  30 * time.Second,
		LogLevel:      "info",
		LogFormat:     "text",
		AdminListen:   "unix:///run/hubproxy/admin.sock",
		GPUDriverPath: "libcuda.so.1",
		GPULeaseTTL:   10 * time.Minute,
	}
}

// Validate reports the first configuration error in words a user can act on.
func (c Config) Validate() error {
	if dir, ok := strings.CutPrefix(c.Upstream, "dir:"); ok {
		if dir == "" {
			return errors.New("upstream dir: needs a path, e.g. dir:/models")
		}
	} else if u, err := url.Parse(c.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("upstream %q: must be an http(s) URL or dir:PATH", c.Upstream)
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || u.Host == "" {
			return fmt.Errorf("public-url %q: must be an absolute URL", c.PublicURL)
		}
	}
	if c.CacheDir == "" {
		return errors.New("cache-dir: must be set")
	}
	if c.CacheMaxBytes < 0 || c.MinFreeBytes < 0 || c.BlockSize < 0 || c.ChunkSize < 0 || c.ReadAhead < 0 || c.UpstreamConns < 0 {
		return errors.New("sizes and counts must not be negative")
	}
	if c.BlockSize > 0 && c.ChunkSize > 0 && c.ChunkSize < c.BlockSize {
		return fmt.Errorf("chunk-size (%d) must be at least block-size (%d)", c.ChunkSize, c.BlockSize)
	}
	return nil
}

// New builds hubproxy from cfg and returns its main handler. The returned
// cleanup closes the cache.
func New(cfg Config, log *slog.Logger) (http.Handler, func() error, error) {
	h, err := Build(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	return h.Main, h.Close, nil
}

// Handlers are hubproxy's two listeners' handlers: the hub-compatible API and
// the admin API (GPU staging, cache stats), which must only be served on a
// Unix socket or loopback.
type Handlers struct {
	Main  http.Handler
	Admin http.Handler
	// Close releases the cache and any GPU memory.
	Close func() error
}

// Build builds hubproxy from cfg.
func Build(cfg Config, log *slog.Logger) (*Handlers, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	transport := cfg.Transport
	if transport == nil {
		transport = fetch.DefaultTransport()
	}
	upstream := cfg.Upstream
	closeDir := func() error { return nil }
	if dir, ok := strings.CutPrefix(cfg.Upstream, "dir:"); ok {
		// A directory of repos served as a hub, in process: for air-gapped
		// clusters and for trying hubproxy without internet.
		dh, err := dirhub.New(dir, dirhub.Options{Logger: log.With("component", "dirhub")})
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", cfg.Upstream, err)
		}
		go dh.Warm(context.Background()) // hash plain-folder files ahead of the first HEAD
		upstream, transport, closeDir = dirhub.URL, dirhub.Transport(dh), dh.Close
	}
	client, err := fetch.New(fetch.Options{
		Upstream:      upstream,
		Token:         cfg.UpstreamToken,
		RedirectHosts: cfg.RedirectHosts,
		Transport:     m.Transport(transport),
		UserAgent:     "hubproxy",
		StallTimeout:  cfg.StallTimeout,
	})
	if err != nil {
		closeDir()
		return nil, fmt.Errorf("upstream client: %w", err)
	}
	store, err := cache.Open(cache.Options{
		Dir:          cfg.CacheDir,
		MaxBytes:     cfg.CacheMaxBytes,
		MinFreeBytes: cfg.MinFreeBytes,
		BlockSize:    cfg.BlockSize,
		ChunkSize:    cfg.ChunkSize,
		ReadAhead:    cfg.ReadAhead,
		MaxFills:     cfg.UpstreamConns,
		FillTimeout:  cfg.FillTimeout,
		Logger:       log.With("component", "cache"),
	})
	if err != nil {
		closeDir()
		return nil, fmt.Errorf("opening cache %s: %w", cfg.CacheDir, err)
	}
	metrics.RegisterStore(reg, func() metrics.StoreStats {
		st := store.Stats()
		return metrics.StoreStats{
			BlobBytes: st.BlobBytes, PartialBytes: st.PartialBytes, Blobs: st.Blobs, Partials: st.Partials,
			InUse: st.InUse, Evictions: st.Evictions, FillRequests: st.FillRequests, FillBytes: st.FillBytes,
			FillErrors: st.FillErrors, Promotions: st.Promotions, VerifyFailed: st.VerifyFailures,
			FillsInFlight: st.FillsInFlight, Waiters: st.Waiters,
		}
	})
	res := resolver.New(client, store, resolver.Options{
		RevisionTTL: cfg.RevisionTTL,
		URLTTL:      cfg.URLTTL,
		AccessTTL:   cfg.AccessTTL,
		Observe:     m.ObserveAccess,
		Offline:     cfg.Offline,
		Logger:      log.With("component", "resolver"),
	})
	srv := server.New(server.Options{
		Resolver:  res,
		Store:     store,
		Upstream:  client,
		PublicURL: cfg.PublicURL,
		Offline:   cfg.Offline,
		Logger:    log.With("component", "server"),
		// Zero means the resolver's default, so the two always agree.
		RevisionTTL:    res.RevisionTTL(),
		AccessTTL:      res.AccessTTL(),
		Metrics:        m,
		MetricsHandler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		Ready:          newReadiness(cfg.CacheDir, upstream, cfg.Offline, transport).check,
	})
	stager := cfg.Stager
	var closeGPU func() error
	if stager == nil {
		c, err := gpu.Open(gpu.Options{
			DriverPath:   cfg.GPUDriverPath,
			LeaseTTL:     cfg.GPULeaseTTL,
			DeviceBudget: cfg.GPUDeviceBudgetBytes,
		})
		if err != nil {
			store.Close()
			closeDir()
			return nil, fmt.Errorf("gpu: %w", err)
		}
		if !c.Available() {
			_, why := c.Devices()
			log.Info("GPU staging unavailable", "reason", why)
		}
		stager, closeGPU = c, c.Close
	}
	m.RegisterGPU(reg, func() (int, int64) {
		ls := stager.Leases()
		var b int64
		for _, l := range ls {
			b += l.Bytes
		}
		return len(ls), b
	})
	admin := srv.Admin(server.AdminOptions{
		Stager:  stager,
		Stats:   func() any { return store.Stats() },
		OnStage: m.ObserveStage,
	})
	return &Handlers{Main: srv, Admin: admin, Close: func() error {
		if closeGPU != nil {
			closeGPU()
		}
		return errors.Join(store.Close(), closeDir())
	}}, nil
}

// The wiring asserts the consumer-side interfaces here, where both sides meet.
var (
	_ resolver.Upstream = (*fetch.Client)(nil)
	_ resolver.Store    = (*cache.Store)(nil)
	_ server.Resolver   = (*resolver.Resolver)(nil)
	_ server.Store      = (*cache.Store)(nil)
	_ server.Upstream   = (*fetch.Client)(nil)
)
