package server

import (
	"encoding/json"
	"net/http"
	"os"

	"github.com/go-chi/chi/v5"
)

// The admin API spends GPU memory, so it is served only on the admin
// listener: a Unix socket or loopback, never the pod IP. Its JSON is
// snake_case like the rest of the API, and its errors take the same shape
// as the public listener's (writeError).
//
//	GET    /gpu/devices             devices by ordinal, UUID and PCI bus id: memory, health, what is leased
//	POST   /gpu/stage               stage tensors onto a device as one lease (gpu_stage.go)
//	GET    /gpu/leases              the caller's live leases (all of them for the operator)
//	DELETE /gpu/leases/{id}         release one of the caller's leases (idempotent)
//	POST   /gpu/leases/{id}/renew   restart a lease's TTL: the heartbeat of a consumer that holds no socket
//	GET    /cache/stats             the cache's counters
//	GET    /debug/pprof/…           Go profiles (net/http/pprof), only with AdminOptions.Pprof (pprof.go)
//
// A lease is its stager's: the uid the kernel names for the staging
// connection (SO_PEERCRED, read by AdminConnContext, which the admin
// http.Server must use). Another caller is answered as if the lease did not
// exist; hubproxy's own uid is the operator's and sees every lease. Over
// loopback TCP there is no credential: a lease's id is its only proof and
// listing is refused. gpu_owner.go has the rules and why.

// AdminOptions configures the admin handler.
type AdminOptions struct {
	Stager Stager
	// Stats, when set, is served at /cache/stats.
	Stats func() any
	// OnStage is told the bytes and seconds of each successful staging.
	OnStage func(bytes int64, seconds float64)
	// Pprof serves Go's profiles under /debug/pprof/ (config key pprof).
	Pprof bool
}

// Admin returns the admin API handler. It shares the server's resolver,
// cache and tensor service, so staging a cold tensor streams it from upstream
// through the cache, with the caller's own access checked.
func (s *Server) Admin(opts AdminOptions) http.Handler {
	a := &admin{s: s, opts: opts, owners: newOwners(uint32(os.Geteuid()))}
	r := chi.NewRouter()
	r.Use(s.requestID, s.accessLog)
	s.routeErrors(r)
	r.Get("/gpu/devices", a.devices)
	r.Post("/gpu/stage", a.stage)
	r.Get("/gpu/leases", a.leases)
	r.Delete("/gpu/leases/{id}", a.release)
	r.Post("/gpu/leases/{id}/renew", a.renew)
	r.Get("/cache/stats", a.stats)
	if opts.Pprof {
		routePprof(r)
	}
	return r
}

type admin struct {
	s      *Server
	opts   AdminOptions
	owners *owners // who staged each lease (gpu_owner.go)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func (a *admin) stats(w http.ResponseWriter, r *http.Request) {
	if a.opts.Stats == nil {
		a.s.writeError(w, r, errNoRoute)
		return
	}
	writeJSON(w, http.StatusOK, a.opts.Stats())
}
