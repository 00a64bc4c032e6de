package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// The admin API spends GPU memory, so it is served only on the admin
// listener: a Unix socket or loopback, never the pod IP. Its JSON is
// snake_case like the rest of the API, and its errors take the same shape
// as the public listener's (writeError).
//
//	GET    /gpu/devices        devices, memory, what is leased
//	POST   /gpu/stage          stage tensors onto a device as one lease
//	GET    /gpu/leases         live leases
//	DELETE /gpu/leases/{id}    release a lease (idempotent)
//	GET    /cache/stats        the cache's counters
//	GET    /debug/pprof/…      Go profiles (net/http/pprof)

// Stager is the GPU copier as the admin API uses it.
type Stager interface {
	Available() bool
	Devices() ([]gpu.Device, error)
	Stage(ctx context.Context, device int, srcs []gpu.Source) (*gpu.Lease, error)
	Leases() []gpu.Lease
	Release(id string) error
}

// AdminOptions configures the admin handler.
type AdminOptions struct {
	Stager Stager
	// Stats, when set, is served at /cache/stats.
	Stats func() any
	// OnStage is told the bytes and seconds of each successful staging.
	OnStage func(bytes int64, seconds float64)
}

// Admin returns the admin API handler. It shares the server's resolver,
// cache and tensor service, so staging a cold tensor streams it from upstream
// through the cache, with the caller's own access checked.
func (s *Server) Admin(opts AdminOptions) http.Handler {
	a := &admin{s: s, opts: opts}
	r := chi.NewRouter()
	r.Use(s.requestID, s.accessLog)
	s.routeErrors(r)
	r.Get("/gpu/devices", a.devices)
	r.Post("/gpu/stage", a.stage)
	r.Get("/gpu/leases", a.leases)
	r.Delete("/gpu/leases/{id}", a.release)
	r.Get("/cache/stats", a.stats)
	// Profiles, for finding where time goes under load; never on the
	// public listener (they can stall the process and reveal internals).
	r.HandleFunc("/debug/pprof/", pprof.Index)
	r.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	r.HandleFunc("/debug/pprof/profile", pprof.Profile)
	r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	r.HandleFunc("/debug/pprof/trace", pprof.Trace)
	r.Handle("/debug/pprof/{profile}", http.HandlerFunc(pprof.Index))
	return r
}

type admin struct {
	s    *Server
	opts AdminOptions
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// DevicesResponse is the answer of GET /gpu/devices.
type DevicesResponse struct {
	Available bool         `json:"available"`
	Reason    string       `json:"reason,omitempty"` // why staging is unavailable
	Devices   []DeviceJSON `json:"devices"`
}

// DeviceJSON is one GPU as the admin API shows it.
type DeviceJSON struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	TotalBytes  int64  `json:"total_bytes"`
	FreeBytes   int64  `json:"free_bytes"` // -1 until the copier has used the device, or when the query fails
	BudgetBytes int64  `json:"budget_bytes"`
	LeasedBytes int64  `json:"leased_bytes"`
}

func (a *admin) devices(w http.ResponseWriter, r *http.Request) {
	out := DevicesResponse{Available: a.opts.Stager.Available(), Devices: []DeviceJSON{}}
	devs, err := a.opts.Stager.Devices()
	switch {
	case !out.Available:
		out.Reason = errString(err)
	case err != nil:
		a.s.writeError(w, r, err)
		return
	}
	for _, d := range devs {
		if !out.Available {
			break
		}
		out.Devices = append(out.Devices, DeviceJSON{Index: d.Index, Name: d.Name, TotalBytes: d.TotalBytes,
			FreeBytes: d.FreeBytes, BudgetBytes: d.BudgetBytes, LeasedBytes: d.LeasedBytes})
	}
	writeJSON(w, http.StatusOK, out)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// StageRequest is the body of POST /gpu/stage.
type StageRequest struct {
	Repo     string   `json:"repo"`
	Revision string   `json:"revision"`
	File     string   `json:"file,omitempty"`
	Names    []string `json:"names,omitempty"`
	Prefix   string   `json:"prefix,omitempty"`
	Shard    string   `json:"shard,omitempty"` // "dim:rank/world", applied to every tensor
	Device   int      `json:"device"`
}

// StagedTensor is one tensor of a lease.
type StagedTensor struct {
	Name   string   `json:"name"`
	DType  string   `json:"dtype"`
	Shape  []uint64 `json:"shape"`
	Offset int64    `json:"offset"`
	Bytes  int64    `json:"bytes"`
}

// StageResponse is the answer of POST /gpu/stage.
type StageResponse struct {
	Lease     string         `json:"lease"`
	Device    int            `json:"device"`
	IPCHandle string         `json:"ipc_handle"` // base64 of the 64-byte CUipcMemHandle
	Bytes     int64          `json:"bytes"`
	Seconds   float64        `json:"seconds"`
	GBps      float64        `json:"gbps"`
	Expires   time.Time      `json:"expires"`
	Commit    string         `json:"commit"`
	Tensors   []StagedTensor `json:"tensors"`
}

const maxStageBody = 1 << 20

func (a *admin) stage(w http.ResponseWriter, r *http.Request) {
	var req StageRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxStageBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		a.s.writeError(w, r, &requestError{"stage request: " + err.Error()})
		return
	}
	if !a.opts.Stager.Available() {
		_, err := a.opts.Stager.Devices()
		a.s.writeError(w, r, err)
		return
	}
	repo, err := hub.ParseRepo(hub.Model, req.Repo)
	if err == nil {
		err = a.s.opts.Admission.repo(repo)
	}
	if err != nil {
		a.s.writeError(w, r, err)
		return
	}
	if req.Revision == "" {
		req.Revision = "main"
	}
	if err := hub.ValidRevision(req.Revision); err != nil {
		a.s.writeError(w, r, err)
		return
	}
	each, err := a.s.opts.Tensors.OpenEach(r.Context(), r.Header.Get("Authorization"), repo, req.Revision, req.File, req.Names, req.Prefix, req.Shard)
	if err != nil {
		a.s.writeError(w, r, err)
		return
	}
	defer each.Close()
	srcs := make([]gpu.Source, 0, len(each.Tensors))
	out := StageResponse{Commit: each.Commit, Tensors: make([]StagedTensor, 0, len(each.Tensors))}
	for _, t := range each.Tensors {
		srcs = append(srcs, gpu.Source{Name: t.Tensor.Name, R: t.Assembly, Off: 0, Len: t.Size()})
		out.Tensors = append(out.Tensors, StagedTensor{Name: t.Tensor.Name, DType: string(t.Tensor.DType), Shape: t.Shape, Bytes: t.Size()})
	}
	lease, err := a.opts.Stager.Stage(r.Context(), req.Device, srcs)
	if err != nil {
		a.s.writeError(w, r, err)
		return
	}
	for i, p := range lease.Placements {
		out.Tensors[i].Offset = p.Offset
	}
	out.Lease, out.Device, out.Bytes, out.Expires = lease.ID, lease.Device, lease.Bytes, lease.Expires
	out.IPCHandle = base64.StdEncoding.EncodeToString(lease.IPCHandle)
	out.Seconds = lease.Elapsed.Seconds()
	if out.Seconds > 0 {
		out.GBps = float64(lease.Bytes) / out.Seconds / 1e9
	}
	if a.opts.OnStage != nil {
		a.opts.OnStage(lease.Bytes, out.Seconds)
	}
	writeJSON(w, http.StatusOK, out)
}

// LeasesResponse is the answer of GET /gpu/leases.
type LeasesResponse struct {
	Leases []LeaseJSON `json:"leases"`
}

// LeaseJSON is one live lease.
type LeaseJSON struct {
	ID      string          `json:"lease"`
	Device  int             `json:"device"`
	Bytes   int64           `json:"bytes"`
	Expires time.Time       `json:"expires"`
	Tensors []PlacementJSON `json:"tensors"`
}

// PlacementJSON is where one tensor sits in a lease's allocation.
type PlacementJSON struct {
	Name   string `json:"name"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
}

func (a *admin) leases(w http.ResponseWriter, r *http.Request) {
	ls := a.opts.Stager.Leases()
	out := LeasesResponse{Leases: make([]LeaseJSON, 0, len(ls))}
	for _, l := range ls {
		lj := LeaseJSON{ID: l.ID, Device: l.Device, Bytes: l.Bytes, Expires: l.Expires, Tensors: make([]PlacementJSON, 0, len(l.Placements))}
		for _, p := range l.Placements {
			lj.Tensors = append(lj.Tensors, PlacementJSON{Name: p.Name, Offset: p.Offset, Bytes: p.Len})
		}
		out.Leases = append(out.Leases, lj)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *admin) release(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if id == "" || len(id) > 128 || strings.ContainsAny(id, "/\\\x00") {
		a.s.writeError(w, r, &requestError{"invalid lease id"})
		return
	}
	if err := a.opts.Stager.Release(id); err != nil && !errors.Is(err, gpu.ErrUnknownLease) {
		a.s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *admin) stats(w http.ResponseWriter, r *http.Request) {
	if a.opts.Stats == nil {
		a.s.writeError(w, r, errNoRoute)
		return
	}
	writeJSON(w, http.StatusOK, a.opts.Stats())
}
