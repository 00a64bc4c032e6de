// Package app is hubproxy's composition root: it builds every part from one
// typed Config and returns the HTTP handler plus a cleanup function. Nothing
// else wires packages together, and nothing here reads flags or the
// environment (that is cmd/hubproxy's job).
package app

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	apispec "github.com/hubproxy/hubproxy/api"
	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/dirhub"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/inproc"
	"github.com/hubproxy/hubproxy/internal/repoapi"
	"github.com/hubproxy/hubproxy/internal/repofs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/metrics"
	"github.com/hubproxy/hubproxy/internal/resolver"
	"github.com/hubproxy/hubproxy/internal/s3api"
	"github.com/hubproxy/hubproxy/internal/server"
	"github.com/hubproxy/hubproxy/internal/sharedfill"
	"github.com/hubproxy/hubproxy/internal/sharedstore"
	"github.com/hubproxy/hubproxy/internal/tensor"
)

// Config is everything hubproxy serve needs. Zero values mean the defaults
// documented in configs/hubproxy.yaml (applied by Defaults).
type Config struct {
	Listen string `mapstructure:"listen"`
	// S3Listen, when set, is the address of the read-only S3 API
	// (internal/s3api) over the same cache, core and admission; off by
	// default.
	S3Listen      string   `mapstructure:"s3-listen"`
	Upstream      string   `mapstructure:"upstream"`
	UpstreamToken string   `mapstructure:"upstream-token"`
	RedirectHosts []string `mapstructure:"redirect-hosts"`
	// S3CredentialsFile, when set, names the S3 access keys whose SigV4
	// signatures the S3 API verifies, each mapped to the Hub token its
	// requests are made with (internal/s3api's readCredentials has the
	// format); without it only Hub tokens (hf_…) and anonymous callers.
	S3CredentialsFile string `mapstructure:"s3-credentials-file"`
	// AllowRepos and DenyRepos narrow the repos served (path.Match
	// patterns on "ns/name", "datasets/ns/name"); deny wins. Empty allows all.
	AllowRepos []string `mapstructure:"allow-repos"`
	DenyRepos  []string `mapstructure:"deny-repos"`
	// ClientTokensFile, when set, names a file of accepted caller tokens
	// (one per line, # comments): callers must present one.
	ClientTokensFile string `mapstructure:"client-tokens-file"`
	PublicURL        string `mapstructure:"public-url"`
	Offline          bool   `mapstructure:"offline"`
	CacheDir         string `mapstructure:"cache-dir"`
	CacheMaxBytes    int64  `mapstructure:"cache-max-bytes"`
	// Pins are repos ("[datasets/]ns/name[@rev]") kept from eviction and
	// from pruning, on this node and in the shared store.
	Pins          []string      `mapstructure:"pins"`
	MinFreeBytes  int64         `mapstructure:"cache-min-free-bytes"`
	BlockSize     int64         `mapstructure:"block-size"`
	ChunkSize     int64         `mapstructure:"chunk-size"`
	ReadAhead     int           `mapstructure:"read-ahead"`
	UpstreamConns int           `mapstructure:"upstream-parallelism"`
	RevisionTTL   time.Duration `mapstructure:"revision-ttl"`
	AccessTTL     time.Duration `mapstructure:"access-ttl"`
	PublicTTL     time.Duration `mapstructure:"public-ttl"`
	OutageGrace   time.Duration `mapstructure:"outage-grace"`
	URLTTL        time.Duration `mapstructure:"url-ttl"`
	FillTimeout   time.Duration `mapstructure:"fill-timeout"`
	StallTimeout  time.Duration `mapstructure:"stall-timeout"`
	// MetadataTimeout bounds one upstream metadata call (a HEAD, an API
	// answer's headers), retries included; the one huggingface_hub gives a
	// HEAD is 10s, so a slower answer is worthless to the client anyway.
	MetadataTimeout time.Duration `mapstructure:"metadata-timeout"`
	// ShutdownTimeout is how long SIGTERM waits for transfers in flight.
	ShutdownTimeout time.Duration `mapstructure:"shutdown-timeout"`
	// RequestReadTimeout bounds how long a request, headers and body, may
	// take to arrive (0: no bound); MaxConnections caps the hub API's open
	// connections (0: no cap). Both keep a slow or hostile client from
	// holding the server's goroutines and descriptors indefinitely.
	RequestReadTimeout time.Duration `mapstructure:"request-read-timeout"`
	MaxConnections     int           `mapstructure:"max-connections"`
	// HeaderCacheBytes bounds the parsed safetensors headers kept in memory.
	HeaderCacheBytes int64 `mapstructure:"tensor-header-cache-bytes"`
	// AccessLogRate bounds the successful request lines logged per second;
	// 0 logs every request.
	AccessLogRate int    `mapstructure:"access-log-rate"`
	LogLevel      string `mapstructure:"log-level"`
	LogFormat     string `mapstructure:"log-format"`

	// GPU staging (admin API).
	AdminListen          string        `mapstructure:"admin-listen"`
	GPUDriverPath        string        `mapstructure:"gpu-driver-path"`
	GPULeaseTTL          time.Duration `mapstructure:"gpu-lease-ttl"`
	GPUDeviceBudgetBytes int64         `mapstructure:"gpu-device-budget-bytes"`
	// GPUResetOnFault resets a GPU's context in process after a sticky
	// fault instead of exiting (gpu.Options.ResetOnFault).
	GPUResetOnFault bool `mapstructure:"gpu-reset-on-fault"`
	// Pprof serves Go's profiles on the admin API; off by default, as they
	// can stall the process and show its internals.
	Pprof bool `mapstructure:"pprof"`

	// The cluster's shared tier (internal/sharedfill). SharedStore, when
	// set, is the object store (s3://, file://) the nodes share chunks
	// through, so each is fetched from upstream once per cluster;
	// SharedStoreLease is how long a node's claim on a chunk may go
	// unrenewed before another node takes the chunk over.
	SharedStore      string        `mapstructure:"shared-store"`
	SharedStoreLease time.Duration `mapstructure:"shared-store-lease"`
	// SharedStoreFallbackAfter is how long a reader waiting for another
	// node's chunk goes without a byte before it reads its own bytes from
	// upstream until the chunk lands (sharedfill.Options.FallbackAfter).
	SharedStoreFallbackAfter time.Duration `mapstructure:"shared-store-fallback-after"`
	// SharedStoreSecretFile names a file holding the cluster's secret,
	// which seals the chunks nodes put in the store so that no one who
	// can merely write the store can make a node serve bytes (shared.go);
	// SharedStoreSecret is the secret itself (for development). A store
	// needs exactly one of them, the same on every node.
	SharedStoreSecretFile string `mapstructure:"shared-store-secret-file"`
	SharedStoreSecret     string `mapstructure:"shared-store-secret"`

	// Transport overrides the upstream HTTP transport (tests).
	Transport http.RoundTripper `mapstructure:"-"`
	// Stager overrides the GPU copier (tests).
	Stager admin.Stager `mapstructure:"-"`
	// Version and Commit name the build, for hubproxy_build_info.
	Version string `mapstructure:"-"`
	Commit  string `mapstructure:"-"`
	// Now is the clock for access and cache-reuse decisions (tests); nil
	// means time.Now.
	Now func() time.Time `mapstructure:"-"`
	// UpstreamCooldown is how long a failed upstream is left alone before a
	// probe (tests shorten or lengthen it); 0 means fetch's default.
	UpstreamCooldown time.Duration `mapstructure:"-"`
}

// Defaults returns the configuration hubproxy serve runs with when nothing is
// set. cmd/hubproxy seeds its flags from it, so the two never disagree.
func Defaults() Config {
	return Config{
		Listen:                   ":8080",
		Upstream:                 "https://huggingface.co",
		CacheMaxBytes:            100 << 30,
		MinFreeBytes:             1 << 30,
		BlockSize:                64 << 10,
		ChunkSize:                8 << 20,
		ReadAhead:                4,
		UpstreamConns:            16,
		SharedStoreLease:         sharedfill.DefaultLease,
		SharedStoreFallbackAfter: sharedfill.DefaultFallback,
		RevisionTTL:              30 * time.Second,
		AccessTTL:                time.Minute,
		PublicTTL:                24 * time.Hour,
		URLTTL:                   30 * time.Minute,
		FillTimeout:              5 * time.Minute,
		StallTimeout:             30 * time.Second,
		MetadataTimeout:          10 * time.Second,
		ShutdownTimeout:          25 * time.Second,
		HeaderCacheBytes:         64 << 20,
		AccessLogRate:            100,
		LogLevel:                 "info",
		LogFormat:                "text",
		AdminListen:              "unix:///run/hubproxy/admin.sock",
		GPUDriverPath:            "libcuda.so.1",
		GPULeaseTTL:              10 * time.Minute,

		RequestReadTimeout: 30 * time.Second,
		MaxConnections:     4096,
	}
}

// ParsedPins parses Pins.
func (c Config) ParsedPins() ([]cache.Pin, error) {
	out := make([]cache.Pin, 0, len(c.Pins))
	for _, s := range c.Pins {
		p, err := cache.ParsePin(s)
		if err != nil {
			return nil, fmt.Errorf("pins: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
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
	if c.CacheMaxBytes < 0 || c.MinFreeBytes < 0 || c.BlockSize < 0 || c.ChunkSize < 0 || c.ReadAhead < 0 || c.UpstreamConns < 0 || c.HeaderCacheBytes < 0 || c.AccessLogRate < 0 || c.MaxConnections < 0 {
		return errors.New("sizes and counts must not be negative")
	}
	if c.BlockSize > 0 && c.ChunkSize > 0 && c.ChunkSize < c.BlockSize {
		return fmt.Errorf("chunk-size (%d) must be at least block-size (%d)", c.ChunkSize, c.BlockSize)
	}
	if _, err := c.ParsedPins(); err != nil {
		return err
	}
	if c.SharedStore != "" {
		if c.Offline {
			return errors.New("shared-store: not with offline, which never fetches anything to share")
		}
		if _, err := sharedstore.ParseURL(c.SharedStore); err != nil {
			return fmt.Errorf("shared-store: %w", err)
		}
	}
	return nil
}

// Handlers are hubproxy's two listeners' handlers: the hub-compatible API and
// the admin API (GPU staging, cache stats), which must only be served on a
// Unix socket or loopback.
type Handlers struct {
	Main  http.Handler
	Admin http.Handler
	// S3 is the read-only S3 API over the same core (serve listens for it
	// on s3-listen), with the hub routes' request ids, access log lines
	// and metrics.
	S3 http.Handler
	// Close releases the cache and any GPU memory.
	Close func() error
	// Metrics is the registry /metrics serves, for what the caller adds
	// around the handlers (the listener's connection counts).
	Metrics prometheus.Registerer
	// Fatal receives the error that ends the process's usefulness: a
	// sticky GPU fault, after which CUDA allows no recovery in process
	// (unless gpu-reset-on-fault). serve drains and exits non-zero on it,
	// for the supervisor to restart hubproxy.
	Fatal <-chan error
}

// fatal hands the first fatal error to Handlers.Fatal.
type fatal struct{ c chan error }

func (f fatal) report(err error) {
	select {
	case f.c <- err:
	default: // one is enough
	}
}

// Build builds hubproxy from cfg.
func Build(cfg Config, log *slog.Logger) (*Handlers, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	admission, err := newAdmission(cfg)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	metrics.RegisterBuildInfo(reg, cmp.Or(cfg.Version, "(devel)"), cfg.Commit, runtime.Version())
	transport := cfg.Transport
	if transport == nil {
		transport = fetch.DefaultTransport()
	}
	instance := newInstance()
	var cleanup cleanups
	upstream := cfg.Upstream
	if dir, ok := strings.CutPrefix(cfg.Upstream, "dir:"); ok {
		// A directory of repos served as a hub, in process: for air-gapped
		// clusters and for trying hubproxy without internet.
		dh, err := dirhub.New(dir, dirhub.Options{Logger: log.With("component", "dirhub")})
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", cfg.Upstream, err)
		}
		go dh.Warm(context.Background()) // hash plain-folder files ahead of the first HEAD
		upstream, transport = dirhub.URL, inproc.Transport(dh)
		cleanup.push(dh.Close)
	}
	client, err := fetch.New(fetch.Options{
		Upstream:        upstream,
		Token:           cfg.UpstreamToken,
		RedirectHosts:   cfg.RedirectHosts,
		Transport:       m.Transport(transport),
		UserAgent:       "hubproxy",
		Instance:        instance,
		StallTimeout:    cfg.StallTimeout,
		MetadataTimeout: cfg.MetadataTimeout,
		Cooldown:        cfg.UpstreamCooldown,
		CheckRedirect:   redirectCheck(upstream, admission),
		Logger:          log.With("component", "upstream"),
	})
	if err != nil {
		cleanup.run()
		return nil, fmt.Errorf("upstream client: %w", err)
	}
	if !cfg.Offline { // offline, the upstream is neither up nor down: it is not used
		metrics.RegisterUpstream(reg, func() bool { return client.Health().Up })
	}
	shared, err := openShared(cfg, reg, log)
	if err != nil {
		cleanup.run()
		return nil, err
	}
	if shared != nil {
		cleanup.push(shared.Close)
	}
	pins, _ := cfg.ParsedPins() // checked by Validate
	store, err := cache.Open(cache.Options{
		Dir:          cfg.CacheDir,
		MaxBytes:     cfg.CacheMaxBytes,
		MinFreeBytes: cfg.MinFreeBytes,
		BlockSize:    cfg.BlockSize,
		ChunkSize:    cfg.ChunkSize,
		ReadAhead:    cfg.ReadAhead,
		MaxFills:     cfg.UpstreamConns,
		// The shared tier serves fills chunk by chunk (chunk-size, as
		// here): a fill across two of its chunks would cost both.
		AlignFills:  shared != nil,
		FillTimeout: cfg.FillTimeout,
		Pins:        pins,
		OnFillError: func(err error) { m.ObserveFillError(fillErrorReason(err)) },
		// A file that failed verification may have come from the
		// shared store: drop the store's copy, so it is fetched anew.
		OnVerifyFailed: shared.forget,
		Logger:         log.With("component", "cache"),
	})
	if err != nil {
		cleanup.run()
		return nil, fmt.Errorf("opening cache %s: %w", cfg.CacheDir, err)
	}
	cleanup.push(store.Close)
	metrics.RegisterStore(reg, store.Stats)
	res := resolver.New(client, store, resolver.Options{
		RevisionTTL: cfg.RevisionTTL,
		URLTTL:      cfg.URLTTL,
		AccessTTL:   cfg.AccessTTL,
		PublicTTL:   cfg.PublicTTL,
		OutageGrace: cfg.OutageGrace,
		Observe:     m.ObserveAccess,
		Offline:     cfg.Offline,
		Now:         cfg.Now,
		Logger:      log.With("component", "resolver"),
	})
	cleanup.push(res.Close)
	files := repofs.New(res, store, client, repofs.Options{
		OnBypass: func(ctx context.Context, repo hub.Repo, path string, err error) {
			m.CacheBypass.Inc()
			log.Error("cache cannot store this file; serving it straight from upstream",
				"component", "repofs", "repo", repo.String(), "path", path, "err", err)
		},
		Share:  shared.share(),
		Logger: log.With("component", "repofs"),
	})
	tensors := tensor.New(files, tensor.Options{
		HeaderCacheBytes: cfg.HeaderCacheBytes,
		BlockSize:        cfg.BlockSize,
		Observe:          m.ObserveHeader,
		Logger:           log.With("component", "tensor"),
	})
	api := repoapi.New(repoapi.Options{
		Policy:   res,
		Store:    store,
		Upstream: client,
		Offline:  cfg.Offline,
		Now:      cfg.Now,
		Logger:   log.With("component", "api"),
	})
	srv := server.New(server.Options{
		Files:          files,
		Tensors:        tensors,
		API:            api,
		PublicURL:      cfg.PublicURL,
		Now:            cfg.Now,
		AccessLogRate:  float64(cfg.AccessLogRate),
		Admission:      admission,
		Logger:         log.With("component", "server"),
		Metrics:        m,
		MetricsHandler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		Ready:          newReadiness(cfg.CacheDir, cfg.Offline, client, shared.health()).check,
		Instance:       instance,
		Version:        cmp.Or(cfg.Version, "(devel)"),
		Spec:           apispec.Spec(),
	})
	fatal := fatal{c: make(chan error, 1)}
	stager := cfg.Stager
	if stager == nil {
		c, err := gpu.Open(gpu.Options{
			DriverPath:   cfg.GPUDriverPath,
			LeaseTTL:     cfg.GPULeaseTTL,
			DeviceBudget: cfg.GPUDeviceBudgetBytes,
			ResetOnFault: cfg.GPUResetOnFault,
			OnFatal:      fatal.report,
			Logger:       log.With("component", "gpu"),
		})
		if err != nil {
			cleanup.run()
			return nil, fmt.Errorf("gpu: %w", err)
		}
		if !c.Available() {
			_, why := c.Devices()
			log.Info("GPU staging unavailable", "reason", why)
		}
		stager = c
		cleanup.push(c.Close)
	}
	m.RegisterGPU(reg, func() (int, int64) {
		ls := stager.Leases()
		var b int64
		for _, l := range ls {
			b += l.Bytes
		}
		return len(ls), b
	})
	metrics.RegisterGPUDevices(reg, admin.DeviceHealth(stager))
	adm := admin.New(admin.Options{
		Server:    srv,
		Tensors:   tensors,
		Stager:    stager,
		Admission: admission,
		Stats:     func() any { return store.Stats() },
		OnStage:   m.ObserveStage,
		Pprof:     cfg.Pprof,
		Logger:    log.With("component", "admin"),
	})
	// The credentials file is read even when s3-listen is off, so a bad
	// one fails the start it would fail later, not a first S3 request.
	s3auth, err := s3api.NewAuthenticator(s3api.AuthOptions{CredentialsFile: cfg.S3CredentialsFile})
	if err != nil {
		cleanup.run()
		return nil, err
	}
	s3 := chi.NewMux()
	srv.Plumbing(s3)
	s3.Handle("/*", s3api.New(s3api.Options{
		Files:     files,
		API:       api,
		Admission: admission,
		Auth:      s3auth,
		Logger:    log.With("component", "s3"),
	}))
	return &Handlers{Main: srv, Admin: adm, S3: s3, Close: cleanup.run, Metrics: reg, Fatal: fatal.c}, nil
}

// newInstance names this process in the Via header of its upstream
// requests, so that a request that comes back to it (an upstream setting
// that points here, directly or through other proxies) is refused at once
// rather than waited on. Random, so two replicas behind one address are
// still told apart.
func newInstance() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24)
	return "hubproxy-" + hex.EncodeToString(b[:])
}

// cleanups is a stack of release functions, run last-in first-out: Build
// pushes each part as it is made, so a failure part-way releases exactly what
// was built, and Close releases everything in the reverse order of building.
type cleanups struct {
	once sync.Once
	fns  []func() error
	err  error
}

func (c *cleanups) push(fn func() error) { c.fns = append(c.fns, fn) }

// run releases everything once; later calls return the same error.
func (c *cleanups) run() error {
	c.once.Do(func() {
		var errs []error
		for i := len(c.fns) - 1; i >= 0; i-- {
			errs = append(errs, c.fns[i]())
		}
		c.err = errors.Join(errs...)
	})
	return c.err
}

// The wiring asserts the consumer-side interfaces here, where both sides meet.
var (
	_ resolver.Upstream          = (*fetch.Client)(nil)
	_ resolver.Store             = (*cache.Store)(nil)
	_ repofs.Resolver            = (*resolver.Resolver)(nil)
	_ repofs.Store               = (*cache.Store)(nil)
	_ repofs.Upstream            = (*fetch.Client)(nil)
	_ server.Files               = (*repofs.FS)(nil)
	_ repoapi.Policy             = (*resolver.Resolver)(nil)
	_ repoapi.Store              = (*cache.Store)(nil)
	_ repoapi.Upstream           = (*fetch.Client)(nil)
	_ server.API                 = (*repoapi.Service)(nil)
	_ s3api.Files                = (*repofs.FS)(nil)
	_ s3api.API                  = (*repoapi.Service)(nil)
	_ s3api.Admission            = (*server.Admission)(nil)
	_ s3api.CallerAuth           = (*s3api.Authenticator)(nil)
	_ tensor.Files[*repofs.File] = (*repofs.FS)(nil)
	_ tensor.RangeReader         = (*repofs.File)(nil) // sparse reads (column shards) bypass block fills
)
