// Package repoapi answers the hub's JSON API for a caller: repo info, tree
// and paths-info are cached per caller and revision, with every Xet field
// removed and pagination links pointed at the proxy, and are given without
// upstream only as the access policy allows; the Xet token route is
// refused; every other /api/ request is relayed uncached. It is the domain
// half of the API routes: internal/server parses HTTP and writes what this
// package answers, and never consults the access policy itself.
package repoapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/flight"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// MaxResponseBody bounds an upstream answer that is cached: a tree page is
// at most 1000 entries.
const MaxResponseBody = 64 << 20

// flightTimeout bounds one shared upstream API call, which no single
// caller's context may cancel (the call stops sooner when every caller has
// left).
const flightTimeout = 2 * time.Minute

// Policy is the access policy API answers are given under (the resolver's):
// it records what upstream answered a caller, and decides whether a cached
// answer may be given without asking upstream.
type Policy interface {
	// AnsweredMetadata records upstream's answer to a caller's metadata
	// request about repo (nil, or the *fetch.StatusError it answered). It
	// is never a grant of the repo's files.
	AnsweredMetadata(c hub.Caller, repo hub.Repo, err error)
	// NotPublic records that an upstream answer about repo itself said it
	// is private or gated (never the reverse: only the resolver's own probe
	// may find a repo public).
	NotPublic(repo hub.Repo)
	// Reusable reports whether an answer about revision rev stored at
	// stored may be reused without asking upstream (access-ttl, and
	// revision-ttl for a branch or tag); answers are cached per caller.
	Reusable(rev string, stored time.Time) bool
	// MayReplayMetadata decides whether caller may have a cached metadata
	// answer about repo without upstream; anonAt is when upstream gave that
	// very answer to an anonymous caller (zero if never). nil or
	// ErrUnverifiable.
	MayReplayMetadata(c hub.Caller, repo hub.Repo, anonAt time.Time) error
}

// Store keeps cached answers and the refs they name (the cache).
type Store interface {
	WriteRef(repo hub.Repo, rev, commit string) error
	PutMeta(key string, data []byte) error
	GetMeta(key string) ([]byte, error)
}

// Upstream sends API requests to the hub.
type Upstream interface {
	API(ctx context.Context, method, pathAndQuery, auth string, header http.Header, body []byte) (*http.Response, error)
	// Relay is API for a request passed through: it never marks the
	// upstream down.
	Relay(ctx context.Context, method, pathAndQuery, auth string, header http.Header, body []byte) (*http.Response, error)
	Upstream() *url.URL
}

// Options configures a Service; Policy, Store and Upstream are required.
type Options struct {
	Policy   Policy
	Store    Store
	Upstream Upstream
	// Offline answers only from the cache.
	Offline bool
	// Now is the clock answers are stored and judged by; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Service answers API requests. Safe for concurrent use.
type Service struct {
	opts    Options
	log     *slog.Logger
	flights flight.Group[*shared]
}

// New returns a Service.
func New(opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: opts, log: log}
}

// Request is one client API request, as the HTTP front door parsed it.
type Request struct {
	URL          hub.APIURL
	Method       string
	PathAndQuery string     // the escaped path and raw query, as the client sent them
	Caller       hub.Caller // who asks: its ID keys the cache, its Auth goes upstream
	ContentType  string
	Body         []byte // a POST's body, already bounded by the front door
	// PublicBase is the proxy's base URL as this client reaches it:
	// pagination links and moves are rewritten onto it.
	PublicBase string
}

// Source says where an answer came from.
type Source string

const (
	Hit  Source = "hit"  // a cached answer
	Miss Source = "miss" // upstream's answer, now cached
	Pass Source = ""     // relayed uncached
)

// Response is an answer to give the client. Body is never nil; the caller
// closes it. A relayed Body streams from upstream and may fail part-way.
type Response struct {
	Status int
	Header http.Header
	Body   io.ReadCloser
	Source Source
	// UpstreamBytes is what reading this answer cost upstream (a cached
	// answer's; a relayed body is counted by whoever copies it).
	UpstreamBytes int64
}

// Do answers req.
func (s *Service) Do(ctx context.Context, req Request) (*Response, error) {
	switch {
	case req.URL.Kind == hub.APIXetToken:
		// Never reached while Xet signals are stripped, but a client with
		// a tree cache filled straight from the Hub may still ask.
		return nil, &fetch.StatusError{Code: http.StatusNotFound, ErrorCode: "EntryNotFound",
			Message: "Xet is not available through hubproxy; files are served over plain HTTP"}
	case Cached(req.URL, req.Method):
		return s.cached(ctx, req)
	}
	return s.relay(ctx, req)
}

// Cached reports whether Do answers a request for u with method from the
// cache (repo info, tree, paths-info) rather than relaying it.
func Cached(u hub.APIURL, method string) bool {
	switch u.Kind {
	case hub.APIInfo, hub.APITree:
		return method == http.MethodGet || method == http.MethodHead
	case hub.APIPathsInfo:
		return method == http.MethodPost
	}
	return false
}

// shared is one flight's outcome; the first caller to take it is charged
// its upstream bytes.
type shared struct {
	env     envelope
	source  Source
	bytes   int64
	charged atomic.Bool
}

func (s *Service) cached(ctx context.Context, req Request) (*Response, error) {
	key := metaKey(req.Caller, req.Method, req.PathAndQuery, req.ContentType, req.Body)
	env, lerr := s.load(key)
	if s.reusable(env, lerr, req) {
		return s.response(req, env, Hit, 0), nil
	}
	if s.opts.Offline {
		env, err := s.replay(env, lerr, req)
		if err != nil {
			return nil, err
		}
		return s.response(req, env, Hit, 0), nil
	}
	// N identical cold requests of one caller make one upstream call. The
	// key holds the caller's ID (a hash of its credential), so only the
	// same caller's requests share an answer.
	sh, err := s.flights.Do(ctx, key, flightTimeout, func(fctx context.Context) (*shared, error) {
		// Look again inside the flight: a flight that ended just before
		// this one started has stored an answer this caller may reuse,
		// and without this check its followers would each ask upstream
		// once more (groupcache's load does the same).
		if env, err := s.load(key); s.reusable(env, err, req) {
			return &shared{env: env, source: Hit}, nil
		}
		return s.fetch(fctx, key, req)
	})
	if err != nil {
		return nil, err
	}
	var n int64
	if sh.charged.CompareAndSwap(false, true) {
		n = sh.bytes
	}
	return s.response(req, sh.env, sh.source, n), nil
}

// reusable reports whether a cached answer (env, as load returned it with
// err) may be reused by this caller without asking upstream.
func (s *Service) reusable(env envelope, err error, req Request) bool {
	return err == nil && s.opts.Policy.Reusable(req.URL.Rev, env.Stored)
}

// replay returns the cached answer for key when upstream cannot be asked,
// as the access policy allows: an answer upstream gave this very anonymous
// caller, a repo upstream says is public, or a caller it granted the repo
// within the grace. env and err are what load returned for the request's key.
func (s *Service) replay(env envelope, err error, req Request) (envelope, error) {
	if err != nil {
		if s.opts.Offline {
			return envelope{}, resolver.ErrOffline
		}
		return envelope{}, err
	}
	var anonAt time.Time
	if req.Caller.Anonymous() {
		anonAt = env.Stored
	}
	if err := s.opts.Policy.MayReplayMetadata(req.Caller, req.URL.Repo, anonAt); err != nil {
		return envelope{}, err
	}
	return env, nil
}

// fetch asks upstream, records what the answer says of the caller's
// access, and caches a JSON 200. An unavailable upstream is answered from
// the cache where the policy allows.
func (s *Service) fetch(ctx context.Context, key string, req Request) (*shared, error) {
	hdr := http.Header{}
	if req.ContentType != "" {
		hdr.Set("Content-Type", req.ContentType)
	}
	method := req.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	resp, err := s.opts.Upstream.API(ctx, method, req.PathAndQuery, req.Caller.Auth(), hdr, req.Body)
	if err == nil && (resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests) {
		err = fmt.Errorf("upstream API answered %d: %w", resp.StatusCode, fetch.ErrUnavailable)
		resp.Body.Close()
	}
	if err != nil {
		if !errors.Is(err, fetch.ErrUnavailable) {
			return nil, err
		}
		cached, lerr := s.load(key)
		if lerr != nil {
			return nil, err // nothing cached to fall back on
		}
		env, ferr := s.replay(cached, nil, req)
		if ferr != nil {
			return nil, fmt.Errorf("%w (%v)", ferr, err)
		}
		s.log.Debug("upstream API failing, answering from cache", "path", req.PathAndQuery, "err", err)
		return &shared{env: env, source: Hit}, nil
	}
	defer resp.Body.Close()
	s.opts.Policy.AnsweredMetadata(req.Caller, req.URL.Repo, outcome(resp))
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBody+1))
	if err != nil || len(data) > MaxResponseBody {
		return nil, fmt.Errorf("reading upstream API answer: %w", fetch.ErrUnavailable)
	}
	env := envelope{Stored: s.opts.Now(), Status: resp.StatusCode, Header: map[string]string{}, Body: data}
	for _, k := range keptHeaders {
		if v := resp.Header.Get(k); v != "" {
			env.Header[k] = v
		}
	}
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(env.Header["Content-Type"], "application/json") {
		stripped, sha, err := stripXet(data)
		if err != nil {
			return nil, &fetch.ProtocolError{URL: req.PathAndQuery, Reason: "upstream API answer is not valid JSON"}
		}
		env.Body = stripped
		// A client's repo-info answer never makes a repo public: its
		// expand= may leave "gated" out (docs/hub-protocol.md §9), so only
		// the resolver's own unprojected probe can. But one that says the
		// repo is private or gated is believed at once: that only ever
		// makes the access policy stricter.
		if req.URL.Kind == hub.APIInfo && saysNotPublic(data) {
			s.opts.Policy.NotPublic(req.URL.Repo)
		}
		if req.URL.Kind == hub.APIInfo && req.URL.Rev != "" && !hub.IsCommit(req.URL.Rev) && hub.IsCommit(sha) {
			if err := s.opts.Store.WriteRef(req.URL.Repo, req.URL.Rev, sha); err != nil {
				s.log.Warn("writing ref", "repo", req.URL.Repo.String(), "err", err)
			}
		}
		s.store(key, env)
	}
	return &shared{env: env, source: Miss, bytes: int64(len(data))}, nil
}

// outcome is what an API answer says of the caller's access: nil for a
// 2xx, the upstream's refusal or missing-entry answer as a *fetch.StatusError
// for a 4xx (only the status and X-Error-Code matter to the policy).
func outcome(resp *http.Response) error {
	if resp.StatusCode < 300 {
		return nil
	}
	return &fetch.StatusError{Code: resp.StatusCode, ErrorCode: resp.Header.Get("X-Error-Code")}
}

// response is env as this client is answered: Link pointed at the proxy as
// the client reaches it.
func (s *Service) response(req Request, env envelope, src Source, upstreamBytes int64) *Response {
	h := make(http.Header, len(env.Header)+1)
	for k, v := range env.Header {
		if k == "Link" {
			v = RewriteLinks(v, s.opts.Upstream.Upstream().String(), req.PublicBase)
		}
		h.Set(k, v)
	}
	h.Set("Content-Length", strconv.Itoa(len(env.Body)))
	return &Response{Status: env.Status, Header: h, Body: io.NopCloser(bytes.NewReader(env.Body)), Source: src, UpstreamBytes: upstreamBytes}
}
