package admin

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/metrics"
)

// Stager is the GPU copier as the admin API uses it.
type Stager interface {
	Available() bool
	Devices() ([]gpu.Device, error)
	Stage(ctx context.Context, device int, srcs []gpu.Source, opts gpu.StageOptions) (*gpu.Lease, error)
	// ExportFD returns a new file descriptor for a gpu.HandoverFD lease's
	// memory; the caller closes it.
	ExportFD(id string) (*os.File, error)
	Leases() []gpu.Lease
	Renew(id string) (gpu.Lease, error)
	Release(id string) error
}

// DevicesResponse is the answer of GET /gpu/devices.
type DevicesResponse struct {
	Available bool         `json:"available"`
	Reason    string       `json:"reason,omitempty"` // why staging is unavailable
	Devices   []DeviceJSON `json:"devices"`
}

// DeviceJSON is one GPU as the admin API shows it. A consumer names its
// device by UUID or PCI bus id: Index is hubproxy's own ordinal, which
// differs from the consumer's wherever CUDA_VISIBLE_DEVICES does.
type DeviceJSON struct {
	Index            int    `json:"index"`
	Name             string `json:"name"`
	UUID             string `json:"uuid"`
	PCIBusID         string `json:"pci_bus_id"`
	NUMANode         int    `json:"numa_node"`
	Handover         string `json:"handover"` // what "auto" gives here: fd (VMM) or ipc
	GranularityBytes int64  `json:"granularity_bytes"`
	TotalBytes       int64  `json:"total_bytes"`
	FreeBytes        int64  `json:"free_bytes"` // -1 until the copier has used the device, or when the query fails
	HeadroomBytes    int64  `json:"headroom_bytes"`
	BudgetBytes      int64  `json:"budget_bytes"`
	LeasedBytes      int64  `json:"leased_bytes"`
	Health           string `json:"health"` // ok, recovering, failed
	Faults           int64  `json:"faults"`
	Recoveries       int64  `json:"recoveries"`
	LastError        string `json:"last_error,omitempty"`
}

func (a *admin) devices(w http.ResponseWriter, r *http.Request) {
	out := DevicesResponse{Available: a.opts.Stager.Available(), Devices: []DeviceJSON{}}
	devs, err := a.opts.Stager.Devices()
	switch {
	case !out.Available:
		out.Reason = errString(err)
	case err != nil:
		a.writeError(w, r, err)
		return
	}
	for _, d := range devs {
		if !out.Available {
			break
		}
		out.Devices = append(out.Devices, DeviceJSON{Index: d.Index, Name: d.Name, UUID: d.UUID, PCIBusID: d.PCIBusID,
			NUMANode: d.NUMANode, Handover: d.Handover.String(), GranularityBytes: d.GranularityBytes,
			TotalBytes: d.TotalBytes, FreeBytes: d.FreeBytes, HeadroomBytes: d.HeadroomBytes, BudgetBytes: d.BudgetBytes,
			LeasedBytes: d.LeasedBytes, Health: string(d.Health), Faults: d.Faults, Recoveries: d.Recoveries, LastError: d.LastError})
	}
	writeJSON(w, http.StatusOK, out)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// LeasesResponse is the answer of GET /gpu/leases.
type LeasesResponse struct {
	Leases []LeaseJSON `json:"leases"`
}

// LeaseJSON is one live lease. Expires is absent for a held lease: it
// lives as long as the connection that staged it.
type LeaseJSON struct {
	ID         string          `json:"lease"`
	Device     int             `json:"device"`
	DeviceUUID string          `json:"device_uuid"`
	Bytes      int64           `json:"bytes"`
	Handover   string          `json:"handover"`
	Held       bool            `json:"held"`
	Expires    *time.Time      `json:"expires,omitempty"`
	Tensors    []PlacementJSON `json:"tensors"`
}

// PlacementJSON is where one tensor sits in a lease's allocation.
type PlacementJSON struct {
	Name   string `json:"name"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
}

func leaseJSON(l gpu.Lease) LeaseJSON {
	lj := LeaseJSON{ID: l.ID, Device: l.Device, DeviceUUID: l.DeviceUUID, Bytes: l.Bytes, Handover: l.Handover.String(),
		Held: l.Held, Expires: expires(l), Tensors: make([]PlacementJSON, 0, len(l.Placements))}
	for _, p := range l.Placements {
		lj.Tensors = append(lj.Tensors, PlacementJSON{Name: p.Name, Offset: p.Offset, Bytes: p.Len})
	}
	return lj
}

func expires(l gpu.Lease) *time.Time {
	if l.Held || l.Expires.IsZero() {
		return nil
	}
	return &l.Expires
}

// leases lists the caller's own leases, or all of them for the operator
// (owner.go). An anonymous caller cannot list: the list would give it
// the ids that are the only proof of owning an anonymous lease.
func (a *admin) leases(w http.ResponseWriter, r *http.Request) {
	caller := peerOf(r)
	if !caller.known {
		a.writeError(w, r, &requestError{"listing leases needs the admin API on a Unix socket (admin-listen unix://…), " +
			"where hubproxy can tell whose leases are whose; here renew or release a lease by the id its staging answered"})
		return
	}
	ls := a.owners.visible(caller, a.opts.Stager.Leases())
	out := LeasesResponse{Leases: make([]LeaseJSON, 0, len(ls))}
	for _, l := range ls {
		out.Leases = append(out.Leases, leaseJSON(l))
	}
	writeJSON(w, http.StatusOK, out)
}

// leaseID validates the {id} of a lease route.
func leaseID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "id")
	if id == "" || len(id) > 128 || strings.ContainsAny(id, "/\\\x00") {
		return "", &requestError{"invalid lease id"}
	}
	return id, nil
}

// release ends one of the caller's leases. Another's is, to the caller,
// unknown: 204 like any unknown id (releasing is idempotent), nothing freed.
func (a *admin) release(w http.ResponseWriter, r *http.Request) {
	id, err := leaseID(r)
	if err == nil && !a.owners.allows(peerOf(r), id) {
		a.refused(r, id, "release")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err == nil {
		if err = a.opts.Stager.Release(id); err == nil || errors.Is(err, gpu.ErrUnknownLease) {
			a.owners.forget(id)
			err = nil // releasing is idempotent
		}
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// renew is the heartbeat of a consumer that keeps no connection open to
// hold its lease: each call restarts the TTL. A lease that was let expire
// is gone (404): with the legacy IPC handover its memory was freed. So is,
// to the caller, a lease that is not its own.
func (a *admin) renew(w http.ResponseWriter, r *http.Request) {
	id, err := leaseID(r)
	if err == nil && !a.owners.allows(peerOf(r), id) {
		a.refused(r, id, "renew")
		err = notYours(id)
	}
	var l gpu.Lease
	if err == nil {
		l, err = a.opts.Stager.Renew(id)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, leaseJSON(l))
}

// refused logs a renew or release of a lease that is not the caller's,
// which the caller is answered as for an unknown lease: the log is where
// an operator finds out why a consumer's lease "does not exist".
func (a *admin) refused(r *http.Request, id, what string) {
	a.log.Info("gpu: "+what+" refused: no such lease of the caller's (unknown, gone or another's)", "lease", id, "caller", peerOf(r).String())
}

// DeviceHealth reads the stager's devices for the GPU health metrics
// (metrics.RegisterGPUDevices).
func DeviceHealth(st Stager) func() []metrics.GPUDevice {
	return func() []metrics.GPUDevice {
		if !st.Available() {
			return nil
		}
		ds, err := st.Devices()
		if err != nil {
			return nil
		}
		out := make([]metrics.GPUDevice, 0, len(ds))
		for _, d := range ds {
			out = append(out, metrics.GPUDevice{Index: d.Index, UUID: d.UUID, Healthy: d.Health == gpu.HealthOK,
				Faults: d.Faults, Recoveries: d.Recoveries})
		}
		return out
	}
}
