package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

const (
	maxAPIRequestBody  = 4 << 20  // paths-info bodies list paths; a few MiB is plenty
	maxAPIResponseBody = 64 << 20 // a tree page is ≤ 1000 entries
)

// serveAPI answers /api/…: repo info, tree and paths-info are cached per
// caller and revision with Xet fields removed; xet-read-token is refused;
// everything else passes through uncached.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	ar, err := hub.ParseAPIURL(r.URL.EscapedPath())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.admitAPI(r, ar); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch {
	case ar.Kind == hub.APIXetToken:
		// Never reached when Xet signals are stripped, but a client with a
		// tree cache filled straight from the Hub may still ask (§2).
		s.writeError(w, r, &fetch.StatusError{Code: http.StatusNotFound, ErrorCode: "EntryNotFound",
			Message: "Xet is not available through hubproxy; files are served over plain HTTP"})
	case (ar.Kind == hub.APIInfo || ar.Kind == hub.APITree) && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		s.serveCachedJSON(w, r, ar, nil)
	case ar.Kind == hub.APIPathsInfo && r.Method == http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, maxAPIRequestBody+1))
		if err != nil {
			s.writeError(w, r, &requestError{"reading the request body: " + err.Error()})
			return
		}
		if len(body) > maxAPIRequestBody {
			s.writeError(w, r, &tooLargeError{maxAPIRequestBody})
			return
		}
		s.serveCachedJSON(w, r, ar, body)
	default:
		s.passAPI(w, r)
	}
}

// envelope is a cached API answer: enough to replay it exactly.
type envelope struct {
	Stored time.Time         `json:"stored"`
	Status int               `json:"status"`
	Header map[string]string `json:"header"`
	Body   []byte            `json:"body"`
}

// keptAPIHeaders are the upstream response headers a cached answer replays.
// Link is rewritten at serve time, since the public URL depends on the request.
var keptAPIHeaders = []string{"Content-Type", "Link", "X-Repo-Commit", "X-Error-Code", "X-Error-Message", "ETag"}

func (s *Server) serveCachedJSON(w http.ResponseWriter, r *http.Request, ar hub.APIURL, body []byte) {
	auth := r.Header.Get("Authorization")
	pathAndQuery := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		pathAndQuery += "?" + r.URL.RawQuery
	}
	key := metaKey(auth, r.Method, pathAndQuery, r.Header.Get("Content-Type"), body)
	cached, cerr := s.loadEnvelope(key)
	// An answer is reused per caller (the key holds a hash of the
	// credentials) for as long as the access policy lets that caller reuse
	// an answer about this repo and revision.
	if cerr == nil && s.opts.Resolver.Reusable(auth, ar.Repo, ar.Rev, cached.Stored) {
		info(r).cache = "hit"
		s.writeEnvelope(w, r, cached)
		return
	}
	info(r).cache = "miss"
	// Without upstream, a cached answer is given only as the access policy
	// allows: an answer upstream gave this anonymous caller, a repo upstream
	// says is public, or a caller it granted the repo within the grace.
	fallback := func() error {
		if cerr != nil {
			if s.opts.Offline {
				return resolver.ErrOffline
			}
			return cerr
		}
		var anonAt time.Time
		if auth == "" {
			anonAt = cached.Stored
		}
		return s.opts.Resolver.MayReplayMetadata(auth, ar.Repo, anonAt)
	}
	if s.opts.Offline {
		if err := fallback(); err != nil {
			s.writeError(w, r, err)
			return
		}
		info(r).cache = "hit"
		s.writeEnvelope(w, r, cached)
		return
	}
	hdr := http.Header{}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		hdr.Set("Content-Type", ct)
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	resp, err := s.opts.Upstream.API(r.Context(), method, pathAndQuery, auth, hdr, body)
	if err == nil && (resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests) {
		err = fmt.Errorf("upstream API answered %d: %w", resp.StatusCode, fetch.ErrUnavailable)
		resp.Body.Close()
	}
	if err != nil {
		if errors.Is(err, fetch.ErrUnavailable) && cerr == nil {
			if ferr := fallback(); ferr != nil {
				s.writeError(w, r, fmt.Errorf("%w (%v)", ferr, err))
				return
			}
			s.log.Debug("upstream API failing, answering from cache", "path", r.URL.EscapedPath(), "err", err)
			info(r).cache = "hit"
			s.writeEnvelope(w, r, cached)
			return
		}
		s.writeError(w, r, err)
		return
	}
	defer resp.Body.Close()
	s.opts.Resolver.AnsweredMetadata(auth, ar.Repo, apiOutcome(resp))
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIResponseBody+1))
	info(r).tally.Add(int64(len(data)))
	if err != nil || len(data) > maxAPIResponseBody {
		s.writeError(w, r, fmt.Errorf("reading upstream API answer: %w", fetch.ErrUnavailable))
		return
	}
	env := envelope{Stored: s.opts.Now(), Status: resp.StatusCode, Header: map[string]string{}, Body: data}
	for _, k := range keptAPIHeaders {
		if v := resp.Header.Get(k); v != "" {
			env.Header[k] = v
		}
	}
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(env.Header["Content-Type"], "application/json") {
		stripped, sha, err := stripXet(data)
		if err != nil {
			s.writeError(w, r, &fetch.ProtocolError{URL: r.URL.EscapedPath(), Reason: "upstream API answer is not valid JSON"})
			return
		}
		env.Body = stripped
		// A client's repo-info answer never makes a repo public: its
		// expand= may leave "gated" out (docs/hub-protocol.md §9), so only
		// the resolver's own unprojected probe can. But one that says the
		// repo is private or gated is believed at once: that only ever
		// makes the access policy stricter.
		if ar.Kind == hub.APIInfo && saysNotPublic(data) {
			s.opts.Resolver.NotPublic(ar.Repo)
		}
		if ar.Kind == hub.APIInfo && ar.Rev != "" && !hub.IsCommit(ar.Rev) && hub.IsCommit(sha) {
			if err := s.opts.Store.WriteRef(ar.Repo, ar.Rev, sha); err != nil {
				s.log.Warn("writing ref", "repo", ar.Repo.String(), "err", err)
			}
		}
		if b, err := json.Marshal(env); err == nil {
			if err := s.opts.Store.PutMeta(key, b); err != nil {
				s.log.Warn("caching API answer", "err", err)
			}
		}
	}
	s.writeEnvelope(w, r, env)
}

// apiOutcome is what an API answer says of the caller's access: nil for a
// 2xx, the upstream's refusal or missing-entry answer as a *fetch.StatusError
// for a 4xx (only the status and X-Error-Code matter to the policy).
func apiOutcome(resp *http.Response) error {
	if resp.StatusCode < 300 {
		return nil
	}
	return &fetch.StatusError{Code: resp.StatusCode, ErrorCode: resp.Header.Get("X-Error-Code")}
}

// saysNotPublic reports whether a repo-info answer says the repo is private
// or gated. Absent fields say nothing (a projection).
func saysNotPublic(data []byte) bool {
	var info struct {
		Private *bool `json:"private"`
		Gated   any   `json:"gated"`
	}
	if json.Unmarshal(data, &info) != nil {
		return false
	}
	if info.Private != nil && *info.Private {
		return true
	}
	switch g := info.Gated.(type) {
	case nil:
		return false // absent (or null): not asked
	case bool:
		return g
	default:
		return true // "auto", "manual", or a form we do not know: the stricter meaning
	}
}

func metaKey(auth, method, pathAndQuery, contentType string, body []byte) string {
	a := sha256.Sum256([]byte(auth))
	b := sha256.Sum256(body)
	return "api\x00" + hex.EncodeToString(a[:]) + "\x00" + method + "\x00" + pathAndQuery + "\x00" + contentType + "\x00" + hex.EncodeToString(b[:])
}

func (s *Server) loadEnvelope(key string) (envelope, error) {
	data, err := s.opts.Store.GetMeta(key)
	if err != nil {
		return envelope{}, err
	}
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return envelope{}, err
	}
	return env, nil
}

func (s *Server) writeEnvelope(w http.ResponseWriter, r *http.Request, env envelope) {
	h := w.Header()
	for k, v := range env.Header {
		if k == "Link" {
			v = rewriteLinks(v, s.opts.Upstream.Upstream().String(), s.publicBase(r))
		}
		h.Set(k, v)
	}
	h.Set("Content-Length", strconv.Itoa(len(env.Body)))
	w.WriteHeader(env.Status)
	if r.Method != http.MethodHead {
		w.Write(env.Body)
	}
}

// stripXet removes every "xetHash" field (docs/hub-protocol.md §2): a client that
// sees one in a tree listing skips the proxy and talks to Xet directly. It
// also returns the top-level "sha", if any.
func stripXet(data []byte) ([]byte, string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep numbers exactly as upstream wrote them
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, "", err
	}
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			delete(t, "xetHash")
			for _, c := range t {
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		}
	}
	walk(v)
	sha := ""
	if m, ok := v.(map[string]any); ok {
		sha, _ = m["sha"].(string)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, "", err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), sha, nil
}

// hopHeaders are never copied from an upstream answer: hop-by-hop headers
// (RFC 9110 §7.6.1), lengths we recompute, and every Xet signal.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Content-Encoding": true, "Alt-Svc": true, "Strict-Transport-Security": true,
}

// passAPI relays any other /api/ request uncached, rewriting Link and
// Location so pagination and relative moves stay on the proxy.
func (s *Server) passAPI(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
		var err error
		if body, err = io.ReadAll(io.LimitReader(r.Body, maxAPIRequestBody+1)); err != nil {
			s.writeError(w, r, &requestError{"reading the request body: " + err.Error()})
			return
		}
		if len(body) > maxAPIRequestBody {
			s.writeError(w, r, &tooLargeError{maxAPIRequestBody})
			return
		}
	}
	hdr := http.Header{}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		hdr.Set("Content-Type", ct)
	}
	pathAndQuery := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		pathAndQuery += "?" + r.URL.RawQuery
	}
	resp, err := s.opts.Upstream.Relay(r.Context(), r.Method, pathAndQuery, r.Header.Get("Authorization"), hdr, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer resp.Body.Close()
	up, public := s.opts.Upstream.Upstream().String(), s.publicBase(r)
	for k, vs := range resp.Header {
		if hopHeaders[k] || strings.HasPrefix(k, "X-Xet-") || k == "X-Request-Id" {
			continue
		}
		for _, v := range vs {
			switch k {
			case "Link":
				v = rewriteLinks(v, up, public)
			case "Location":
				v = rewriteURL(v, up, public)
			}
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	n, err := io.Copy(w, resp.Body)
	info(r).tally.Add(n)
	if err != nil && r.Context().Err() == nil {
		// The upstream stopped mid-body (a stall, a reset): abort, so the
		// client sees a failed transfer rather than a short answer that
		// looks complete.
		s.log.Warn("upstream API answer broke off; aborting the relay", "path", r.URL.EscapedPath(), "err", err)
		panic(http.ErrAbortHandler)
	}
}
