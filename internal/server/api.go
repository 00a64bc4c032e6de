package server

import (
	"context"
	"io"
	"net/http"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/repoapi"
)

// maxAPIRequestBody bounds a client's API request body: paths-info bodies
// list paths, and a few MiB is plenty.
const maxAPIRequestBody = 4 << 20

// API answers the hub's JSON API for a caller (internal/repoapi).
type API interface {
	Do(ctx context.Context, req repoapi.Request) (*repoapi.Response, error)
}

// serveAPI answers /api/…: it parses the request and writes what the API
// service answers (cached, refused or relayed: its decision, not ours).
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
	var body []byte
	if r.Body != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
		if body, err = io.ReadAll(io.LimitReader(r.Body, maxAPIRequestBody+1)); err != nil {
			s.writeError(w, r, &requestError{"reading the request body: " + err.Error()})
			return
		}
		if len(body) > maxAPIRequestBody {
			s.writeError(w, r, &tooLargeError{maxAPIRequestBody})
			return
		}
	}
	pathAndQuery := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		pathAndQuery += "?" + r.URL.RawQuery
	}
	resp, err := s.opts.API.Do(r.Context(), repoapi.Request{
		URL: ar, Method: r.Method, PathAndQuery: pathAndQuery,
		Caller: callerOf(r), ContentType: r.Header.Get("Content-Type"), Body: body,
		PublicBase: s.publicBase(r),
	})
	if resp == nil && err == nil {
		err = hub.ErrNoRoute
	}
	switch {
	case err == nil && resp.Source != repoapi.Pass:
		info(r).cache = string(resp.Source)
	case err != nil && repoapi.Cached(ar, r.Method):
		info(r).cache = "miss"
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer resp.Body.Close()
	info(r).tally.Add(resp.UpstreamBytes)
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.Status)
	if r.Method == http.MethodHead {
		return
	}
	n, err := io.Copy(w, resp.Body)
	if resp.Source == repoapi.Pass {
		info(r).tally.Add(n)
	}
	if err != nil && r.Context().Err() == nil {
		// The upstream stopped mid-body (a stall, a reset): abort, so the
		// client sees a failed transfer rather than a short answer that
		// looks complete.
		s.log.Warn("upstream API answer broke off; aborting the relay", "path", r.URL.EscapedPath(), "err", err)
		panic(http.ErrAbortHandler)
	}
}
