// Package server is hubproxy's HTTP surface: the hub-compatible routes real
// clients use (resolve, raw, the JSON API) and, later, the native tensor API.
// Handlers are thin: they parse and validate the URL, ask the resolver and the
// cache, and serve bytes with http.ServeContent. Every error becomes an HTTP
// answer in exactly one place, writeError.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/metrics"
	"github.com/hubproxy/hubproxy/internal/repofs"
	"github.com/hubproxy/hubproxy/internal/resolver"
	"github.com/hubproxy/hubproxy/internal/secret"
	"github.com/hubproxy/hubproxy/internal/tensor"
)

// Files opens repo files for callers (internal/repofs).
type Files interface {
	Stat(ctx context.Context, c hub.Caller, f hub.FileRef) (resolver.Meta, error)
	Open(ctx context.Context, c hub.Caller, f hub.FileRef) (*repofs.File, error)
}

// Tensors answers the tensor API (internal/tensor).
type Tensors interface {
	List(ctx context.Context, c hub.Caller, f hub.FileRef) (*tensor.Catalog, error)
	OpenTensor(ctx context.Context, c hub.Caller, f hub.FileRef, name string, p tensor.Part) (*tensor.Opened, error)
	OpenSubset(ctx context.Context, c hub.Caller, f hub.FileRef, names, prefixes []string) (*tensor.Bytes, error)
}

// Options configures the server. Files, Tensors and API are required.
type Options struct {
	Files   Files
	Tensors Tensors
	API     API
	// PublicURL is the proxy's externally visible base URL, used to rewrite
	// pagination Links. Empty: derived from each request (Host and
	// X-Forwarded-Proto/-Host).
	PublicURL string
	// Metrics, when set, is updated per request; MetricsHandler serves
	// /metrics.
	Metrics        *metrics.Metrics
	MetricsHandler http.Handler
	// Now is the clock of the access log's budget; nil means time.Now.
	Now func() time.Time
	// AccessLogRate bounds the successful request lines logged per second
	// (errors are always logged); the excess is counted in a summary
	// line. 0 logs every request.
	AccessLogRate float64
	// Admission narrows who may use the proxy and for which repos; nil
	// admits every caller and repo (upstream still decides access).
	Admission *Admission
	// Ready reports whether the proxy can serve, and what it knows of the
	// upstream (/readyz); nil means ready.
	Ready func(ctx context.Context) Readiness
	// Instance is this process's name in the Via header of its upstream
	// requests (fetch.Options.Instance): a request whose Via names it has
	// come back, and is refused with 508 (loop.go). Empty: no check.
	Instance string
	// Version is the build's, shown on the root page.
	Version string
	// Spec is the OpenAPI document served at /openapi.yaml (api.Spec);
	// nil answers that route with 404.
	Spec   []byte
	Logger *slog.Logger
}

// Server holds the handlers' dependencies. Immutable after New.
type Server struct {
	opts   Options
	log    *slog.Logger
	logs   *logBudget // successful request lines per second
	router chi.Router
	bodies smallBodies // buffers of small warm ranges (smallrange.go)
	live   transfers   // responses in flight, for the root page
	root   *template.Template
}

// New returns the server's handler.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, log: log, logs: newLogBudget(opts.AccessLogRate, opts.Now), root: newRootPage()}
	r := chi.NewRouter()
	r.Use(s.requestID, s.accessLog, s.loopGuard)
	routeErrors(r, s.writeError)
	r.Get("/", s.admitCaller(s.serveRoot))
	r.Head("/", s.admitCaller(s.serveRoot))
	r.Get("/openapi.yaml", s.serveSpec)
	r.Head("/openapi.yaml", s.serveSpec)
	healthz := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }
	r.Get("/healthz", healthz)
	r.Head("/healthz", healthz)
	r.Get("/readyz", s.serveReady)
	r.Head("/readyz", s.serveReady)
	if opts.MetricsHandler != nil {
		r.Handle("/metrics", opts.MetricsHandler)
	}
	r.HandleFunc("/api/*", s.admitCaller(s.serveAPI))
	r.HandleFunc("/models/*", s.admitCaller(s.serveModels))
	r.HandleFunc("/*", s.admitCaller(s.serveFiles))
	s.router = r
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// routeErrors makes the router's own 404 and 405 answers take the shape of
// every other error (JSON body, X-Error-Code), on both listeners.
func routeErrors(mux *chi.Mux, writeError ErrorWriter) {
	mux.NotFound(func(w http.ResponseWriter, r *http.Request) { writeError(w, r, hub.ErrNoRoute) })
	mux.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if mux.Match(chi.NewRouteContext(), m, r.URL.Path) {
				allow = append(allow, m)
			}
		}
		writeError(w, r, &methodError{allow: strings.Join(allow, ", ")})
	})
}

type ctxKey int

const requestIDKey ctxKey = 0

// requestID echoes a well-formed client X-Request-Id or makes one, so a log
// line can be matched to what the client saw.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if len(id) == 0 || len(id) > 64 || strings.ContainsFunc(id, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
			var b [8]byte
			rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

// statusWriter records the status and body size for the access log and the
// root page's transfers (which read bytes while the body is written). It
// keeps http.ResponseWriter's ReaderFrom so large bodies still take the fast
// path.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  atomic.Int64
	live   liveTransfer // what the root page lists while a file or tensor is sent
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes.Add(int64(n))
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ReadFrom keeps the wrapped writer's io.ReaderFrom reachable: without it
// io.Copy allocates a buffer per response, and net/http cannot sendfile an
// *os.File body.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	rf, ok := w.ResponseWriter.(io.ReaderFrom)
	if !ok {
		n, err := io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
		w.bytes.Add(n)
		return n, err
	}
	lr, ok := r.(*io.LimitedReader)
	if ok {
		_, ok = lr.R.(*os.File) // a file can go by sendfile; pieces of anything else would each copy through a buffer of their own
	}
	if !ok || lr.N <= progressPiece {
		n, err := rf.ReadFrom(r)
		w.bytes.Add(n)
		return n, err
	}
	// A large file body (http.ServeContent hands over a LimitedReader of
	// the blob) goes in pieces, each still one LimitedReader of the same file
	// that net/http can sendfile, so that the count moves while it is
	// sent; the kernel's sendfile loop works in pieces this size anyway.
	var total int64
	for lr.N > 0 {
		n, err := rf.ReadFrom(&io.LimitedReader{R: lr.R, N: min(lr.N, progressPiece)})
		lr.N -= n
		total += n
		w.bytes.Add(n)
		if err != nil || n == 0 {
			return total, err // n == 0: the source ended early, as io.Copy would stop
		}
	}
	return total, nil
}

// progressPiece is the most one ReadFrom sends before the byte count moves.
const progressPiece = 4 << 20

// reqInfo is what a request's handler learns that its log line reports:
// what the cache held of the bytes it asked for, and what upstream and the
// cluster's shared store sent for it (fills it started, bytes streamed
// around the cache, API bodies).
type reqInfo struct {
	cache string // "hit", "partial", "miss" or "bypass"; "" when no file bytes were read
	tally cache.Tally
}

const reqInfoKey ctxKey = 1

// callerOf is who sent r: the Caller of its Authorization header, built
// (and its credential hashed) once per request, by the handler that serves
// it. Everything below keys what it keeps by the Caller's ID and forwards
// only its Auth upstream.
func callerOf(r *http.Request) hub.Caller { return hub.NewCaller(r.Header.Get("Authorization")) }

// info returns the request's reqInfo; a request that did not pass through
// accessLog gets a throwaway one.
func info(r *http.Request) *reqInfo {
	if ri, ok := r.Context().Value(reqInfoKey).(*reqInfo); ok {
		return ri
	}
	return &reqInfo{}
}

// observeCache records what the cache held of a read of want bytes, in the
// metrics and in the request's log line.
func (s *Server) observeCache(r *http.Request, present, want int64) {
	s.opts.Metrics.ObserveCache(present, want)
	if want <= 0 {
		return
	}
	result := "partial"
	switch {
	case present >= want:
		result = "hit"
	case present <= 0:
		result = "miss"
	}
	info(r).cache = result
}

// accessLog logs one line per request and records its metrics. Probes and
// scrapes are logged at debug level: at info they would be most of the log
// (three probes and a scrape every few seconds, per pod) and say nothing.
// Durations are in seconds, a number in JSON and text alike.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		ri := &reqInfo{}
		ctx := context.WithValue(r.Context(), reqInfoKey, ri)
		ctx = cache.WithTally(ctx, &ri.tally)
		route := routeClass(r.URL.Path)
		if r.Method == http.MethodGet && (route == "resolve" || route == "raw" || route == "tensor") {
			// Kept in the writer, which is allocated anyway: a warm small
			// range pays a map insert and delete, no allocation.
			sw.live = liveTransfer{id: w.Header().Get("X-Request-Id"), method: r.Method,
				path: r.URL.EscapedPath(), caller: callerKind(r), start: start, bytes: &sw.bytes}
			defer s.live.remove(s.live.add(&sw.live)) // a handler that aborts (panics) is gone too
		}
		next.ServeHTTP(sw, r.WithContext(ctx))
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		elapsed := time.Since(start).Seconds()
		s.opts.Metrics.ObserveRequest(route, sw.status, elapsed)
		level := slog.LevelInfo
		if route == "health" || route == "metrics" {
			level = slog.LevelDebug
		}
		if !s.log.Enabled(r.Context(), level) {
			return
		}
		if sw.status < 400 && level == slog.LevelInfo {
			ok, skipped := s.logs.take()
			if skipped > 0 {
				s.log.LogAttrs(r.Context(), slog.LevelInfo, "request lines not logged (access-log-rate)", slog.Int64("requests", skipped))
			}
			if !ok {
				return
			}
		}
		// Who asked for what: the query with credential-looking values
		// redacted (a signed URL's, a token=), the peer, the first hop of
		// X-Forwarded-For when a balancer set one, and the user agent.
		// Authorization is never logged.
		attrs := make([]slog.Attr, 0, 15)
		attrs = append(attrs,
			slog.String("id", w.Header().Get("X-Request-Id")),
			slog.String("method", r.Method),
			slog.String("path", r.URL.EscapedPath()),
		)
		if q := logQuery(r.URL.RawQuery); q != "" {
			attrs = append(attrs, slog.String("query", q))
		}
		attrs = append(attrs,
			slog.String("range", r.Header.Get("Range")),
			slog.Int("status", sw.status),
			slog.Int64("bytes", sw.bytes.Load()),
			slog.Float64("duration_s", float64(int64(elapsed*1e6))/1e6),
			slog.String("client", r.RemoteAddr),
		)
		if fwd := forwardedFor(r); fwd != "" {
			attrs = append(attrs, slog.String("forwarded_for", fwd))
		}
		attrs = append(attrs, slog.String("user_agent", clip(r.UserAgent(), 256)))
		if ri.cache != "" {
			attrs = append(attrs, slog.String("cache", ri.cache))
		}
		attrs = append(attrs, slog.Int64("upstream_bytes", ri.tally.Bytes()), slog.Int64("store_bytes", ri.tally.StoreBytes()))
		s.log.LogAttrs(r.Context(), level, "request", attrs...)
	})
}

// logQuery is a raw query as the access log shows it: credential-looking
// values redacted, bounded.
func logQuery(raw string) string {
	if raw == "" {
		return ""
	}
	// A raw '#' in a request's query is part of it, and may start another
	// name=value for a client or proxy that splits there: redact each part.
	parts := strings.Split(raw, "#")
	for i, p := range parts {
		parts[i] = secret.Query(p)
	}
	return clip(strings.Join(parts, "#"), 1024)
}

// forwardedFor is the first hop of X-Forwarded-For, the client as the
// first proxy saw it; it is what the client or a proxy says, so it is
// logged beside the peer address, never instead of it.
func forwardedFor(r *http.Request) string {
	v := r.Header.Get("X-Forwarded-For")
	if v == "" {
		return ""
	}
	first, _, _ := strings.Cut(v, ",")
	return clip(strings.TrimSpace(first), 64)
}

// clip bounds text from a request for a log line.
func clip(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

// callerKind is how the root page names who sent r: never anything of the
// credential itself.
func callerKind(r *http.Request) string {
	if r.Header.Get("Authorization") != "" {
		return "token"
	}
	return "anonymous"
}

// routeClass is the metrics label for a path: a handful of fixed values,
// never anything from the URL itself.
func routeClass(p string) string {
	switch {
	case p == "/healthz" || p == "/readyz":
		return "health"
	case p == "/metrics":
		return "metrics"
	case strings.HasPrefix(p, "/api/"):
		return "api"
	case strings.HasPrefix(p, "/models/") && (strings.Contains(p, "/tensors") || strings.HasSuffix(p, "/safetensors")):
		return "tensor"
	case strings.Contains(p, "/resolve/"):
		return "resolve"
	case strings.Contains(p, "/raw/"):
		return "raw"
	}
	return "other"
}

// Readiness is the body of /readyz. Ready (the status code: 200 or 503)
// means the proxy can serve; the upstream's state is detail, since cached
// content is served whatever it is.
type Readiness struct {
	Ready             bool       `json:"ready"`
	Cache             string     `json:"cache"`    // "ok", or why the cache cannot be written
	Upstream          string     `json:"upstream"` // "up", "down" or "offline"
	UpstreamDownSince *time.Time `json:"upstream_down_since,omitempty"`
	UpstreamReason    string     `json:"upstream_reason,omitempty"`
	// Store is the shared store's state ("up" or "down"), absent without
	// one; a node serves from upstream while it is down, so it never
	// makes the proxy unready either.
	Store          string     `json:"store,omitempty"`
	StoreDownSince *time.Time `json:"store_down_since,omitempty"`
	StoreReason    string     `json:"store_reason,omitempty"`
}

// serveReady answers /readyz: 200 when the cache is writable, 503 otherwise,
// with a JSON body that also says whether upstream is answering.
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	rd := Readiness{Ready: true, Cache: "ok", Upstream: "unknown"}
	if s.opts.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		rd = s.opts.Ready(ctx)
	}
	body, _ := json.Marshal(rd)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	if !rd.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	w.Write(append(body, '\n'))
}

// publicBase is the base URL clients reach the proxy at.
func (s *Server) publicBase(r *http.Request) string {
	if s.opts.PublicURL != "" {
		return strings.TrimSuffix(s.opts.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
		scheme = p
	}
	host := r.Host
	if h := r.Header.Get("X-Forwarded-Host"); h != "" && !strings.ContainsAny(h, "/ \t,") {
		host = h
	}
	return scheme + "://" + host
}
