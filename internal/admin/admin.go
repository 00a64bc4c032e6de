// Package admin is the admin listener: GPU staging and leases, the cache's
// counters and Go's profiles. It spends GPU memory and shows the process's
// internals, so it is served only on a Unix socket or loopback, never the
// pod IP. It shares the public listener's plumbing (server.Server.Plumbing):
// request ids, access log, metrics, and the error table, to which it adds
// the rows for its own errors (errors.go), so its JSON is snake_case like
// the rest of the API and its errors take the same shape.
//
//	GET    /gpu/devices             devices by ordinal, UUID and PCI bus id: memory, health, what is leased
//	POST   /gpu/stage               stage tensors onto a device as one lease (stage.go)
//	GET    /gpu/leases              the caller's live leases (all of them for the operator)
//	DELETE /gpu/leases/{id}         release one of the caller's leases (idempotent)
//	POST   /gpu/leases/{id}/renew   restart a lease's TTL: the heartbeat of a consumer that holds no socket
//	GET    /cache/stats             the cache's counters
//	POST   /cache/prefetch          fill the cache with a repo's files, as the caller (prefetch.go)
//	GET    /transfers               the public listener's responses in flight, with their files
//	GET    /debug/pprof/…           Go profiles (net/http/pprof), only with Options.Pprof (pprof.go)
//
// A lease is its stager's: the uid the kernel names for the staging
// connection (SO_PEERCRED, read by ConnContext, which the admin http.Server
// must use). Another caller is answered as if the lease did not exist;
// hubproxy's own uid is the operator's and sees every lease. Over loopback
// TCP there is no credential: a lease's id is its only proof and listing is
// refused. owner.go has the rules and why.
package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"

	"github.com/go-chi/chi/v5"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/server"
	"github.com/hubproxy/hubproxy/internal/tensor"
)

// Plumber is the public listener's server (*server.Server), whose HTTP
// plumbing the admin listener shares, whose routes a prefetch reads
// through, in process, so that it is answered exactly as the caller's own
// requests would be, and whose responses in flight it lists.
type Plumber interface {
	Plumbing(mux *chi.Mux, rules ...server.ErrorRule) server.ErrorWriter
	http.Handler
	Transfers() []server.Transfer
}

// Tensors opens the tensors a staging names (*tensor.Service): the same
// service as the tensor API's, so staging a cold tensor streams it from
// upstream through the cache, with the caller's own access checked.
type Tensors interface {
	OpenEach(ctx context.Context, c hub.Caller, f hub.FileRef, names []string, prefix, shard string) (*tensor.Each, error)
}

// Options configures the admin handler. Server, Tensors and Stager are
// required.
type Options struct {
	Server  Plumber
	Tensors Tensors
	Stager  Stager
	// Admission holds a staging's repo to the public listener's
	// allow-repos / deny-repos; nil admits every repo.
	Admission *server.Admission
	// Stats, when set, is served at /cache/stats.
	Stats func() any
	// OnStage is told the bytes and seconds of each successful staging.
	OnStage func(bytes int64, seconds float64)
	// Pprof serves Go's profiles under /debug/pprof/ (config key pprof).
	Pprof  bool
	Logger *slog.Logger
}

// New returns the admin API handler.
func New(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := chi.NewRouter()
	a := &admin{opts: opts, log: opts.Logger, owners: newOwners(uint32(os.Geteuid()))}
	a.writeError = opts.Server.Plumbing(r, errorRules...)
	r.Get("/gpu/devices", a.devices)
	r.Post("/gpu/stage", a.stage)
	r.Get("/gpu/leases", a.leases)
	r.Delete("/gpu/leases/{id}", a.release)
	r.Post("/gpu/leases/{id}/renew", a.renew)
	r.Get("/cache/stats", a.stats)
	r.Post("/cache/prefetch", a.prefetch)
	r.Get("/transfers", a.transfers)
	if opts.Pprof {
		routePprof(r)
	}
	return r
}

type admin struct {
	opts       Options
	log        *slog.Logger
	writeError server.ErrorWriter // the one error→HTTP mapping of this listener
	owners     *owners            // who staged each lease (owner.go)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// transfers lists the public listener's responses in flight, with the files
// they name: for the operator, which the admin listener only serves.
func (a *admin) transfers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Transfers []server.Transfer `json:"transfers"`
	}{a.opts.Server.Transfers()})
}

func (a *admin) stats(w http.ResponseWriter, r *http.Request) {
	if a.opts.Stats == nil {
		a.writeError(w, r, hub.ErrNoRoute)
		return
	}
	writeJSON(w, http.StatusOK, a.opts.Stats())
}
