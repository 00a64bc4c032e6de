package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/hubproxy/hubproxy/internal/app"
)

// Viper lives here only. Every key is a flag (--cache-dir), an environment
// variable (HUBPROXY_CACHE_DIR) and a config-file key (cache-dir), in that
// order of precedence, with the defaults of app.Defaults.

func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "hubproxy")
	}
	return filepath.Join(os.TempDir(), "hubproxy-cache")
}

// expandHome expands a leading "~/", which shells do for flags but nothing
// does for config files and environment variables.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// addServeFlags declares every configuration key on fs.
func addServeFlags(fs *pflag.FlagSet) {
	d := app.Defaults()
	fs.String("config", "", "config file (YAML); also HUBPROXY_CONFIG")
	fs.String("listen", d.Listen, "address to serve the hub API on")
	fs.String("upstream", d.Upstream, "hub to proxy (https://huggingface.co, or another hubproxy)")
	fs.String("upstream-token", "", "the proxy's own hub token, used only for callers that send none (prefer HUBPROXY_UPSTREAM_TOKEN)")
	fs.StringSlice("redirect-hosts", nil, "hosts (and their subdomains) bytes may be fetched from besides the upstream, e.g. hf.co,huggingface.co; empty: any, always without credentials")
	fs.String("public-url", "", "externally visible base URL, for pagination links (default: from each request's Host)")
	fs.Bool("offline", false, "serve only from the cache; never contact upstream")
	fs.String("cache-dir", defaultCacheDir(), "cache root; also a valid HF_HUB_CACHE")
	fs.String("cache-max-bytes", formatSize(d.CacheMaxBytes), "cache size budget (LRU eviction); 0 = unlimited")
	fs.String("cache-min-free-bytes", formatSize(d.MinFreeBytes), "evict to keep this much disk free; 0 = off")
	fs.String("block-size", formatSize(d.BlockSize), "fill granularity: ranges round out to this")
	fs.String("chunk-size", formatSize(d.ChunkSize), "largest single upstream range request")
	fs.Int("read-ahead", d.ReadAhead, "chunks kept in flight ahead of a sequential reader")
	fs.Int("upstream-parallelism", d.UpstreamConns, "concurrent upstream range requests, across all files")
	fs.Duration("revision-ttl", d.RevisionTTL, "how long a branch or tag stays mapped to a commit")
	fs.Duration("url-ttl", d.URLTTL, "how long a resolved file and its signed CDN URL are reused")
	fs.Duration("access-ttl", d.AccessTTL, "how long a token's access decision from upstream is reused (revocation delay)")
	fs.Duration("public-ttl", d.PublicTTL, "how long upstream's word that a repo or file is public is trusted while upstream is unavailable")
	fs.Duration("outage-grace", d.OutageGrace, "while upstream is unavailable, callers it granted a repo within this time keep reading it from the cache; 0 = off")
	fs.Duration("metadata-timeout", d.MetadataTimeout, "limit for one upstream metadata call (resolve, API headers), retries included")
	fs.Duration("fill-timeout", d.FillTimeout, "limit for one upstream range request")
	fs.Duration("stall-timeout", d.StallTimeout, "an upstream body making no progress this long is abandoned")
	fs.Duration("shutdown-timeout", d.ShutdownTimeout, "on SIGTERM, how long transfers in flight may finish before they are cut")
	fs.String("tensor-header-cache-bytes", formatSize(d.HeaderCacheBytes), "memory for parsed safetensors headers")
	fs.String("admin-listen", d.AdminListen, "admin API (GPU staging, cache stats): unix:///path or a loopback host:port; empty disables it")
	fs.String("gpu-driver-path", d.GPUDriverPath, "CUDA driver library loaded at run time (builds with -tags cuda)")
	fs.Duration("gpu-lease-ttl", d.GPULeaseTTL, "GPU leases not released by then are freed, so a crashed consumer leaks nothing")
	fs.String("gpu-device-budget-bytes", "0", "most device memory leases may hold per GPU; 0 = 90% of the device")
	fs.String("log-level", d.LogLevel, "debug, info, warn or error")
	fs.String("log-format", d.LogFormat, "text or json")
}

// loadConfig merges flags, HUBPROXY_* variables and the config file.
func loadConfig(fs *pflag.FlagSet) (app.Config, error) {
	v := viper.New()
	// Defaults for every key, so commands that declare only some of the
	// flags (ls, pull) still read the rest from the environment or file.
	d := app.Defaults()
	for key, val := range map[string]any{
		"listen": d.Listen, "upstream": d.Upstream, "cache-dir": defaultCacheDir(),
		"cache-max-bytes": formatSize(d.CacheMaxBytes), "cache-min-free-bytes": formatSize(d.MinFreeBytes),
		"block-size": formatSize(d.BlockSize), "chunk-size": formatSize(d.ChunkSize),
		"read-ahead": d.ReadAhead, "upstream-parallelism": d.UpstreamConns,
		"revision-ttl": d.RevisionTTL, "url-ttl": d.URLTTL, "access-ttl": d.AccessTTL, "fill-timeout": d.FillTimeout,
		"public-ttl": d.PublicTTL, "outage-grace": d.OutageGrace, "metadata-timeout": d.MetadataTimeout,
		"shutdown-timeout": d.ShutdownTimeout, "tensor-header-cache-bytes": formatSize(d.HeaderCacheBytes),
		"stall-timeout": d.StallTimeout, "log-level": d.LogLevel, "log-format": d.LogFormat,
		"admin-listen": d.AdminListen, "gpu-driver-path": d.GPUDriverPath, "gpu-lease-ttl": d.GPULeaseTTL,
		"gpu-device-budget-bytes": "0",
	} {
		v.SetDefault(key, val)
	}
	v.SetEnvPrefix("HUBPROXY")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	if err := v.BindPFlags(fs); err != nil {
		return app.Config{}, err
	}
	if file := v.GetString("config"); file != "" {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return app.Config{}, fmt.Errorf("reading config %s: %w", file, err)
		}
	}
	cfg := app.Config{
		Listen:          v.GetString("listen"),
		Upstream:        v.GetString("upstream"),
		UpstreamToken:   v.GetString("upstream-token"),
		RedirectHosts:   v.GetStringSlice("redirect-hosts"),
		PublicURL:       v.GetString("public-url"),
		Offline:         v.GetBool("offline"),
		CacheDir:        expandHome(v.GetString("cache-dir")),
		ReadAhead:       v.GetInt("read-ahead"),
		UpstreamConns:   v.GetInt("upstream-parallelism"),
		RevisionTTL:     v.GetDuration("revision-ttl"),
		URLTTL:          v.GetDuration("url-ttl"),
		AccessTTL:       v.GetDuration("access-ttl"),
		PublicTTL:       v.GetDuration("public-ttl"),
		OutageGrace:     v.GetDuration("outage-grace"),
		MetadataTimeout: v.GetDuration("metadata-timeout"),
		ShutdownTimeout: v.GetDuration("shutdown-timeout"),
		FillTimeout:     v.GetDuration("fill-timeout"),
		StallTimeout:    v.GetDuration("stall-timeout"),
		LogLevel:        v.GetString("log-level"),
		LogFormat:       v.GetString("log-format"),
		AdminListen:     v.GetString("admin-listen"),
		GPUDriverPath:   v.GetString("gpu-driver-path"),
		GPULeaseTTL:     v.GetDuration("gpu-lease-ttl"),
	}
	for key, dst := range map[string]*int64{
		"cache-max-bytes":           &cfg.CacheMaxBytes,
		"cache-min-free-bytes":      &cfg.MinFreeBytes,
		"block-size":                &cfg.BlockSize,
		"gpu-device-budget-bytes":   &cfg.GPUDeviceBudgetBytes,
		"chunk-size":                &cfg.ChunkSize,
		"tensor-header-cache-bytes": &cfg.HeaderCacheBytes,
	} {
		n, err := parseSize(v.GetString(key))
		if err != nil {
			return app.Config{}, fmt.Errorf("%s: %w", key, err)
		}
		*dst = n
	}
	return cfg, cfg.Validate()
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

// parseSize reads "100GiB", "64KiB", "1.5GB" or a plain byte count.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 && (n == 0 || n <= (1<<62)/mult) {
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("%q is not a size (examples: 100GiB, 64KiB, 1048576)", s)
	}
	return int64(f * float64(mult)), nil
}

// formatSize prints n with the largest binary unit that divides it.
func formatSize(n int64) string {
	for _, u := range sizeUnits[:4] {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("log-format %q: want text or json", format)
}
