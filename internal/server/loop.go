package server

import (
	"net/http"
	"strings"

	"github.com/hubproxy/hubproxy/internal/fetch"
)

// loopGuard refuses, before any work, a request whose Via names this
// process (Options.Instance): it is one of this proxy's own upstream
// requests come back, because the upstream setting points here directly
// or through other proxies. Without it the request would wait on itself
// until the metadata timeout and end as a 504 that says nothing useful.
// Every other request carries its Via on in its context, so that the
// upstream requests made for it extend the chain and a loop through
// several proxies is caught by the one it returns to.
func (s *Server) loopGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		via := r.Header.Values("Via")
		if len(via) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if fetch.ViaNames(via, s.opts.Instance) {
			s.writeError(w, r, fetch.ErrLoop)
			return
		}
		ctx := fetch.WithVia(r.Context(), strings.Join(via, ", "))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
