package admin

import (
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/hubproxy/hubproxy/internal/secret"
)

// routePprof serves Go's profiles under /debug/pprof/, for finding where
// time goes under load. New registers them only with Options.Pprof
// (config key pprof, off by default), and never on the public listener:
// they can stall the process and reveal its internals.
func routePprof(r chi.Router) {
	r.HandleFunc("/debug/pprof/", pprof.Index)
	r.HandleFunc("/debug/pprof/cmdline", cmdline)
	r.HandleFunc("/debug/pprof/profile", pprof.Profile)
	r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	r.HandleFunc("/debug/pprof/trace", pprof.Trace)
	r.Handle("/debug/pprof/{profile}", http.HandlerFunc(pprof.Index))
}

// cmdline is pprof.Cmdline with credentials hidden: the command line may
// carry --upstream-token or a URL with a password, and whoever can reach the
// admin socket is not thereby entitled to them.
func cmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, strings.Join(secret.Args(os.Args), "\x00"))
}
