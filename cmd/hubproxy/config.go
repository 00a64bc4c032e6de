package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/bytesize"
	"github.com/hubproxy/hubproxy/internal/secret"
)

// Every key is a flag (--cache-dir), an environment variable
// (HUBPROXY_CACHE_DIR) and a config-file key (cache-dir), in that order of
// precedence, over the defaults of app.Defaults. The keys are app.Config's
// `mapstructure` tags, so a field added there is a key everywhere at once.
// Viper layers the three sources (layers.go): it binds the flags, maps each
// key to its variable, reads the file and picks the value that wins.
//
// On top of viper, values are parsed strictly and the same way from every
// source: a list is comma-separated in a flag or a variable and a YAML list
// (or that same string) in the file; a duration needs a unit; a boolean is
// true or false; a size takes any form bytesize.Parse does; an unknown key in
// the file is an error naming it. Nothing here relies on viper's loose
// conversions, which turned "a,b" into one list entry and "30" into 30ns:
// viper hands over the raw value (a flag's or variable's text, the YAML
// value) and assign parses it.

// kind is how a key's value is written and parsed.
type kind int

const (
	kindString kind = iota
	kindBool
	kindInt
	kindDuration
	kindSize
	kindList
)

// configKey is one configuration key: its name, kind and where it lands in
// app.Config.
type configKey struct {
	name   string
	kind   kind
	secret bool   // never printed or logged
	field  []int  // index path into app.Config
	help   string // flag usage
}

// secretKeys hold credentials.
var secretKeys = map[string]bool{"upstream-token": true, "shared-store-secret": true}

// keyHelp is each key's one-line flag usage; configs/hubproxy.yaml has the
// full story.
var keyHelp = map[string]string{
	"listen":                      "address to serve the hub API on",
	"s3-listen":                   "address to serve the read-only S3 API on (buckets models and datasets), e.g. :9000; empty: off",
	"upstream":                    "hub to proxy (https://huggingface.co, another hubproxy, or dir:PATH)",
	"upstream-token":              "the proxy's own hub token, used only for callers that send none (prefer the variable to the flag: flags show in ps)",
	"redirect-hosts":              "hosts (and their subdomains) bytes may be fetched from besides the upstream, e.g. hf.co,huggingface.co; empty: any, always without credentials",
	"pins":                        "repos kept from eviction and prune, here and in the shared store: [datasets/]ns/name[@rev]; 'hubproxy cache pin' adds to the cache's own list",
	"allow-repos":                 "serve only repos matching one of these patterns, e.g. Qwen/*,datasets/org/*; empty: every repo",
	"deny-repos":                  "never serve repos matching these patterns (wins over allow-repos)",
	"s3-credentials-file":         "file of S3 access keys, one per line: ACCESS_KEY_ID SECRET HUB_TOKEN (- for anonymous); signatures of these keys are verified; must not be readable by others",
	"client-tokens-file":          "file of accepted caller tokens, one per line; callers must send one as Authorization: Bearer",
	"public-url":                  "externally visible base URL, for pagination links (default: from each request's Host)",
	"offline":                     "serve only from the cache; never contact upstream",
	"cache-dir":                   "cache root; also a valid HF_HUB_CACHE",
	"cache-max-bytes":             "cache size budget (LRU eviction), e.g. 100Gi; 0 = unlimited",
	"cache-min-free-bytes":        "evict to keep this much disk free; 0 = off",
	"block-size":                  "fill granularity: ranges round out to this",
	"chunk-size":                  "largest single upstream range request",
	"read-ahead":                  "chunks in flight ahead of a sequential reader at first (then adapts, up to its share of upstream-parallelism)",
	"upstream-parallelism":        "concurrent upstream range requests, across all files",
	"shared-store":                "object store the cluster's nodes share chunks through, each fetched upstream once: s3://BUCKET[/PREFIX][?endpoint=URL&region=R&use_path_style=true] or file:///DIR; empty: none",
	"shared-store-lease":          "a chunk claim its node stops renewing for this long is taken over by another node",
	"shared-store-fallback-after": "a reader waiting for another node's chunk that gets no byte for this long reads its own bytes from upstream until the chunk lands (keeps clients' reads alive; each such read costs upstream bytes)",
	"shared-store-secret-file":    "file holding the cluster's secret (32+ bytes; the same on every node) that seals chunks in the shared store: head -c 32 /dev/urandom | base64 > FILE",
	"shared-store-secret":         "the cluster's shared-store secret itself, for development (prefer shared-store-secret-file)",
	"revision-ttl":                "how long a branch or tag stays mapped to a commit",
	"access-ttl":                  "how long a token's access decision from upstream is reused (revocation delay)",
	"public-ttl":                  "how long upstream's word that a repo or file is public is trusted while upstream is unavailable",
	"outage-grace":                "while upstream is unavailable, callers it granted a repo within this time keep reading it from the cache; 0 = off",
	"url-ttl":                     "how long a resolved file and its signed CDN URL are reused",
	"fill-timeout":                "limit for one upstream range request",
	"stall-timeout":               "an upstream body making no progress this long is abandoned",
	"metadata-timeout":            "limit for one upstream metadata call (resolve, API headers), retries included",
	"shutdown-timeout":            "on SIGTERM, how long transfers in flight may finish before they are cut",
	"request-read-timeout":        "how long a client may take to send a whole request, body included (a paths-info POST), before its connection is closed; 0 = no limit",
	"max-connections":             "most hub API connections open at once; more wait for one to close; 0 = no cap",
	"pprof":                       "serve Go profiles (/debug/pprof/) on the admin API; the command line they show has secrets hidden",
	"tensor-header-cache-bytes":   "memory for parsed safetensors headers",
	"access-log-rate":             "successful request lines logged per second at most (errors always); the rest are counted; 0 = every request",
	"log-level":                   "debug, info, warn or error",
	"log-format":                  "text or json",
	"admin-listen":                "admin API (GPU staging, cache stats): unix:///path or a loopback host:port; empty disables it; serve does not start if a value given cannot be bound or its socket is in use",
	"gpu-driver-path":             "CUDA driver library loaded at run time (builds with -tags cuda)",
	"gpu-lease-ttl":               "GPU leases not held by their staging connection end after this unless renewed, so a vanished consumer leaks nothing",
	"gpu-device-budget-bytes":     "cap on device memory leases may hold per GPU; 0 = no cap beyond free memory less 10% headroom",
	"gpu-reset-on-fault":          "after a sticky CUDA fault, reset the GPU's context and go on instead of exiting non-zero for the supervisor to restart hubproxy (CUDA documents no in-process recovery)",
}

// configKeys lists every key, in app.Config's field order.
func configKeys() []configKey {
	var keys []configKey
	t := reflect.TypeOf(app.Config{})
	durationType := reflect.TypeOf(time.Duration(0))
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("mapstructure")
		if name == "" || name == "-" {
			continue
		}
		k := configKey{name: name, field: f.Index, secret: secretKeys[name], help: keyHelp[name]}
		switch {
		case f.Type == durationType:
			k.kind = kindDuration
		case f.Type.Kind() == reflect.Int64: // every int64 key is a byte size
			k.kind = kindSize
		case f.Type.Kind() == reflect.Int:
			k.kind = kindInt
		case f.Type.Kind() == reflect.Bool:
			k.kind = kindBool
		case f.Type.Kind() == reflect.Slice:
			k.kind = kindList
		default:
			k.kind = kindString
		}
		keys = append(keys, k)
	}
	return keys
}

// envName is the environment variable of a key, as layers' viper spells it:
// the prefix and the key, upper-cased, with envKeyReplacer applied.
func envName(key string) string {
	return envKeyReplacer.Replace(strings.ToUpper(envPrefix + "_" + key))
}

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

// defaults is app.Defaults with the cache directory of this user.
func defaults() app.Config {
	d := app.Defaults()
	d.CacheDir = defaultCacheDir()
	return d
}

// addServeFlags declares every configuration key on fs.
func addServeFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "config file (YAML); also HUBPROXY_CONFIG")
	d := reflect.ValueOf(defaults())
	for _, k := range configKeys() {
		addKeyFlag(fs, k, d.FieldByIndex(k.field))
	}
}

// addKeyFlag declares one key's flag with its default shown as it is written.
func addKeyFlag(fs *pflag.FlagSet, k configKey, def reflect.Value) {
	help := k.help + " (" + envName(k.name) + ")"
	switch k.kind {
	case kindBool:
		fs.Bool(k.name, def.Bool(), help)
	case kindList:
		// Read raw and split here, so a flag, a variable and a file agree.
		fs.Var(&rawFlag{s: strings.Join(def.Interface().([]string), ","), typ: "list"}, k.name, help+"; comma-separated")
	default:
		fs.Var(&rawFlag{s: render(k, def, false), typ: k.kind.typeName()}, k.name, help)
	}
}

// rawFlag is a key's flag: it keeps what was written, for the one strict
// parser every layer (flag, variable, file) goes through, and names the
// kind of value it takes in --help ("duration", "size"), where a plain
// string flag would say "string" for all of them.
type rawFlag struct{ s, typ string }

func (f *rawFlag) Set(s string) error { f.s = s; return nil }
func (f *rawFlag) String() string     { return f.s }
func (f *rawFlag) Type() string       { return f.typ }

// typeName is what --help shows a key's value as.
func (k kind) typeName() string {
	switch k {
	case kindInt:
		return "int"
	case kindDuration:
		return "duration"
	case kindSize:
		return "size"
	case kindList:
		return "list"
	}
	return "string"
}

// source says where a key's effective value came from.
type source struct {
	kind string // "default", "file", "env" or "flag"
	name string // the file path, variable or flag
}

func (s source) String() string {
	if s.name == "" {
		return s.kind
	}
	return s.kind + " " + s.name
}

// loaded is the effective configuration and where each key came from.
type loaded struct {
	cfg     app.Config
	sources map[string]source
}

// loadConfig merges flags, HUBPROXY_* variables and the config file.
func loadConfig(fs *pflag.FlagSet) (app.Config, error) {
	l, err := load(fs)
	if err != nil {
		return app.Config{}, err
	}
	return l.cfg, nil
}

// load is loadConfig that also keeps each key's source.
func load(fs *pflag.FlagSet) (loaded, error) {
	l := loaded{cfg: defaults(), sources: map[string]source{}}
	lay, err := newLayers(fs)
	if err != nil {
		return loaded{}, err
	}
	v := reflect.ValueOf(&l.cfg).Elem()
	var errs []error
	for _, k := range configKeys() {
		raw, src, ok := lay.lookup(k)
		if !ok {
			l.sources[k.name] = source{kind: "default"}
			continue
		}
		if err := assign(k, raw, v.FieldByIndex(k.field)); err != nil {
			if k.secret { // the parse error would quote the value
				err = errors.New("not a single text value (the value is a secret, so it is not shown)")
			}
			errs = append(errs, fmt.Errorf("%s (from %s): %w", k.name, src, err))
			continue
		}
		l.sources[k.name] = src
	}
	// Errors quote the values they refuse, and a URL's value may carry
	// credentials (http://user:pass@host, ?secret_key=): hide them.
	if err := errors.Join(errs...); err != nil {
		return loaded{}, secret.Error(err)
	}
	l.cfg.CacheDir = expandHome(l.cfg.CacheDir)
	return l, secret.Error(l.cfg.Validate())
}

// loadServe is load followed by checkServe: what serve runs with, refused
// the way serve refuses it. serve and config both call it, so that config's
// promise (invalid values fail here exactly as they fail serve) holds by
// construction rather than by two lists kept alike.
func loadServe(fs *pflag.FlagSet) (loaded, error) {
	l, err := load(fs)
	if err != nil {
		return loaded{}, err
	}
	return l, checkServe(l.cfg)
}

// checkServe is what serve needs of a configuration beyond app.Config's
// Validate: the keys only serve reads (its listeners and its logger), so
// that a bad one stops the start, with a message naming it, before
// anything is built, bound or logged.
func checkServe(cfg app.Config) error {
	var errs []error
	if _, err := parseLogLevel(cfg.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log-format %q: want text or json", cfg.LogFormat))
	}
	if err := checkListen("listen", cfg.Listen); err != nil {
		errs = append(errs, err)
	}
	if cfg.S3Listen != "" {
		if err := checkListen("s3-listen", cfg.S3Listen); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.AdminListen != "" {
		if _, err := parseAdminListen(cfg.AdminListen); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkListen refuses a listen address net.Listen would refuse, with what to
// write instead: "28095" is a port without its colon.
func checkListen(key, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		if _, aerr := strconv.Atoi(addr); aerr == nil {
			return fmt.Errorf("%s %q: want host:port or :port; for port %s on every interface write %q", key, addr, addr, ":"+addr)
		}
		return fmt.Errorf("%s %q: want host:port or :port, e.g. :8080 or 127.0.0.1:8080", key, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%s %q: port %q is not a number from 0 to 65535", key, addr, port)
	}
	return nil
}

// adminAddr is a parsed admin-listen: a Unix socket path, or a loopback TCP
// address.
type adminAddr struct {
	unixPath string // set for unix://PATH
	tcp      string // host:port otherwise
}

// parseAdminListen reads admin-listen. Anything reachable from outside the
// host is refused: the admin API spends GPU memory and ends leases, and
// its only access control is the peer's uid on a Unix socket.
func parseAdminListen(addr string) (adminAddr, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		if path == "" || !filepath.IsAbs(path) {
			return adminAddr{}, fmt.Errorf("admin-listen %q: want an absolute socket path, e.g. unix:///run/hubproxy/admin.sock", addr)
		}
		return adminAddr{unixPath: path}, nil
	}
	if strings.HasPrefix(addr, "/") {
		return adminAddr{}, fmt.Errorf("admin-listen %q: a Unix socket is written unix://%s", addr, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return adminAddr{}, fmt.Errorf("admin-listen %q: want unix:///path or a loopback host:port, e.g. 127.0.0.1:8081", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return adminAddr{}, fmt.Errorf("admin-listen %q: port %q is not a number from 0 to 65535", addr, port)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return adminAddr{}, fmt.Errorf("admin-listen %q: must be a Unix socket or a loopback address (127.0.0.1, ::1, localhost): the admin API is never served off the host", addr)
	}
	return adminAddr{tcp: addr}, nil
}

// assign parses raw (a string from a flag or variable, or a YAML value) as
// k's kind into dst.
func assign(k configKey, raw any, dst reflect.Value) error {
	switch k.kind {
	case kindList:
		list, err := parseList(raw)
		if err != nil {
			return err
		}
		dst.Set(reflect.ValueOf(list))
		return nil
	case kindBool:
		b, err := parseBool(raw)
		if err != nil {
			return err
		}
		dst.SetBool(b)
		return nil
	}
	s, err := scalar(k, raw)
	if err != nil {
		return err
	}
	switch k.kind {
	case kindDuration:
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		dst.SetInt(int64(d))
	case kindSize:
		n, err := bytesize.Parse(s)
		if err != nil {
			return err
		}
		dst.SetInt(n)
	case kindInt:
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		dst.SetInt(int64(n))
	default:
		dst.SetString(s)
	}
	return nil
}

// scalar turns a raw value into the string it is written as. A YAML number
// is accepted where a number is meant (an int, a size in bytes); a YAML list
// or map never is.
func scalar(k configKey, raw any) (string, error) {
	switch v := raw.(type) {
	case string:
		return v, nil
	case int, int64, uint64:
		if k.kind == kindDuration && fmt.Sprint(v) != "0" {
			return "", fmt.Errorf("%v has no unit (write e.g. %vs or %vm)", v, v, v)
		}
		return fmt.Sprint(v), nil
	case float64:
		if k.kind == kindDuration {
			return "", fmt.Errorf("%v has no unit (write e.g. %vs)", v, v)
		}
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case bool:
		if k.kind == kindString {
			return "", fmt.Errorf("%v is a boolean; quote it if you mean the text", v)
		}
	}
	return "", fmt.Errorf("%v is not a single value", raw)
}

// parseDuration reads a Go duration with a unit ("30s", "1h30m", "0"); a
// bare number or a unit Go lacks ("1d") is an error that says what to write.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, fmt.Errorf("%q has no unit (write e.g. %ss or %sm)", s, s, s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if n, ok := strings.CutSuffix(s, "d"); ok {
			if days, perr := strconv.Atoi(n); perr == nil {
				return 0, fmt.Errorf("%q: days are not a unit here; write %dh", s, days*24)
			}
		}
		return 0, fmt.Errorf("%q is not a duration (examples: 30s, 5m, 24h)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

// parseBool accepts true/false (any case) and 1/0, nothing looser: "yes"
// could mean either in some other tool.
func parseBool(raw any) (bool, error) {
	switch v := raw.(type) {
	case bool:
		return v, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "1":
			return true, nil
		case "false", "0":
			return false, nil
		}
		return false, fmt.Errorf("%q is not a boolean (true or false)", v)
	}
	return false, fmt.Errorf("%v is not a boolean (true or false)", raw)
}

// parseList reads a list: comma-separated text, or a YAML list of strings.
// Blank entries are dropped.
func parseList(raw any) ([]string, error) {
	var items []string
	switch v := raw.(type) {
	case string:
		items = strings.Split(v, ",")
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("entry %v is not text", e)
			}
			items = append(items, s)
		}
	case []string:
		items = v
	default:
		return nil, fmt.Errorf("%v is not a list", raw)
	}
	out := []string{}
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// render writes a value the way the config file would: sizes with units,
// durations in Go form, lists comma-separated, secrets hidden: a secret key's
// whole value, and the credentials any other text value's URLs carry.
func render(k configKey, v reflect.Value, redact bool) string {
	switch {
	case k.secret && redact:
		if v.String() == "" {
			return ""
		}
		return "(set, hidden)"
	case k.kind == kindSize:
		return bytesize.Format(v.Int())
	case k.kind == kindDuration:
		return shortDuration(time.Duration(v.Int()))
	case k.kind == kindList:
		list := v.Interface().([]string)
		if redact {
			list = slices.Clone(list)
			for i := range list {
				list[i] = secret.URL(list[i])
			}
		}
		return strings.Join(list, ",")
	case k.kind == kindString && redact:
		return secret.URL(v.String())
	}
	return fmt.Sprint(v.Interface())
}

// logAttrs is the effective configuration as log attributes, secrets
// hidden, for the line serve logs at start.
func (l loaded) logAttrs() []any {
	v := reflect.ValueOf(l.cfg)
	var attrs []any
	for _, k := range configKeys() {
		attrs = append(attrs, slog.String(k.name, render(k, v.FieldByIndex(k.field), true)))
	}
	return attrs
}

// parseLogLevel reads log-level. slog also takes offsets ("info+2"); they
// are accepted, as they are unambiguous.
func parseLogLevel(level string) (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return 0, fmt.Errorf("log-level %q: want debug, info, warn or error", level)
	}
	return lv, nil
}

// logConfig logs the effective configuration at start: a short summary at
// info, what an operator looks for first, and every key on a line of its
// own at debug (with its source, as `hubproxy config` prints it), secrets
// hidden by logAttrs. One line holding every key was a thousand
// characters no one read.
func logConfig(log *slog.Logger, l loaded) {
	c := l.cfg
	store := "no"
	if c.SharedStore != "" {
		store = "yes"
	}
	maxBytes := "unlimited"
	if c.CacheMaxBytes > 0 {
		maxBytes = bytesize.Format(c.CacheMaxBytes)
	}
	log.Info("configuration (hubproxy config shows every key and its source; log-level debug logs them)",
		"upstream", secret.URL(c.Upstream), "listen", c.Listen, "cache_dir", c.CacheDir, "cache_max_bytes", maxBytes,
		"shared_store", store, "offline", c.Offline, "admin_listen", c.AdminListen, "s3_listen", c.S3Listen)
	for _, a := range l.logAttrs() {
		attr := a.(slog.Attr)
		log.Debug("config", "key", attr.Key, "value", attr.Value.String(), "source", l.sources[attr.Key].String())
	}
}

func newLogger(level, format string) (*slog.Logger, error) {
	lv, err := parseLogLevel(level)
	if err != nil {
		return nil, err
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
