package admin

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// StageRequest is the body of POST /gpu/stage.
type StageRequest struct {
	Repo     string   `json:"repo"`
	Revision string   `json:"revision"`
	File     string   `json:"file,omitempty"`
	Names    []string `json:"names,omitempty"`
	Prefix   string   `json:"prefix,omitempty"`
	Shard    string   `json:"shard,omitempty"` // "dim:rank/world", applied to every tensor
	// Device is the GPU's UUID ("GPU-…") or PCI bus id, which name the same
	// device in every process, or hubproxy's own ordinal (a number), which
	// is the consumer's only where both see the same devices in the same
	// order. Default 0.
	Device DeviceRef `json:"device"`
	// Handover is "auto" (default: "fd" over a Unix socket where the
	// device supports VMM, else "ipc"), "fd" or "ipc".
	Handover string `json:"handover,omitempty"`
	// Hold ties the lease to this connection: the answer comes back on it,
	// the connection stays open, and the lease ends when it closes (the
	// consumer said so, or its process is gone). No TTL, no renewal.
	Hold bool `json:"hold,omitempty"`
}

// DeviceRef is a device as a request names it: a JSON number (an ordinal)
// or a string (an ordinal, UUID or PCI bus id; see gpu.FindDevice).
type DeviceRef string

func (d *DeviceRef) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		err := json.Unmarshal(b, &s)
		*d = DeviceRef(s)
		return err
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("device: want a number or a UUID or PCI bus id string, got %s", b)
	}
	*d = DeviceRef(strconv.Itoa(n))
	return nil
}

// StagedTensor is one tensor of a lease.
type StagedTensor struct {
	Name   string   `json:"name"`
	DType  string   `json:"dtype"`
	Shape  []uint64 `json:"shape"`
	Offset int64    `json:"offset"`
	Bytes  int64    `json:"bytes"`
}

// StageResponse is the answer of POST /gpu/stage. With the "fd" handover
// the memory's file descriptor comes with the answer (SCM_RIGHTS, on its
// first byte): the consumer imports it (cuMemImportFromShareableHandle),
// maps Bytes bytes on the device named DeviceUUID, and from then on owns
// its own reference to the memory.
type StageResponse struct {
	Lease      string `json:"lease"`
	Device     int    `json:"device"`
	DeviceUUID string `json:"device_uuid"`
	Handover   string `json:"handover"`             // "fd" or "ipc"
	IPCHandle  string `json:"ipc_handle,omitempty"` // "ipc": base64 of the 64-byte CUipcMemHandle
	// GPUDirectRDMACapable: "fd" memory allocated with
	// gpuDirectRDMACapable, so the consumer may register it with a NIC.
	GPUDirectRDMACapable bool           `json:"gpu_direct_rdma_capable"`
	Held                 bool           `json:"held"`
	Bytes                int64          `json:"bytes"` // the allocation: a multiple of the device's granularity
	Seconds              float64        `json:"seconds"`
	GBps                 float64        `json:"gbps"`
	Expires              *time.Time     `json:"expires,omitempty"` // absent for a held lease
	Commit               string         `json:"commit"`
	Tensors              []StagedTensor `json:"tensors"`
}

const maxStageBody = 1 << 20

// decodeStage reads the whole body: besides its size limit, that is what
// makes net/http watch the connection and cancel the request's context
// when the client goes, which stage relies on to drop an orphaned lease.
func decodeStage(r *http.Request) (StageRequest, error) {
	var req StageRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxStageBody+1))
	switch {
	case err != nil:
		return req, &requestError{"stage request: " + err.Error()}
	case len(body) > maxStageBody:
		return req, &tooLargeError{maxStageBody}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, &requestError{"stage request: " + err.Error()}
	}
	if req.Revision == "" {
		req.Revision = "main"
	}
	return req, nil
}

func (a *admin) stage(w http.ResponseWriter, r *http.Request) {
	req, err := decodeStage(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if !a.opts.Stager.Available() {
		_, err := a.opts.Stager.Devices()
		a.writeError(w, r, err)
		return
	}
	repo, err := hub.ParseRepo(hub.Model, req.Repo)
	if err == nil {
		err = a.opts.Admission.Repo(repo)
	}
	if err == nil {
		err = hub.ValidRevision(req.Revision)
	}
	var dev int
	if err == nil {
		dev, err = a.device(req.Device)
	}
	var how gpu.Handover
	if err == nil {
		how, err = handoverFor(r, req.Handover)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	// The staging's caller is whoever sent it: its own access to the repo
	// is checked upstream, as on the public routes.
	c := hub.NewCaller(r.Header.Get("Authorization"))
	f := hub.FileRef{Repo: repo, Rev: req.Revision, Path: req.File}
	each, err := a.opts.Tensors.OpenEach(r.Context(), c, f, req.Names, req.Prefix, req.Shard)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	defer each.Close()
	srcs := make([]gpu.Source, 0, len(each.Tensors))
	out := StageResponse{Commit: each.Commit, Tensors: make([]StagedTensor, 0, len(each.Tensors))}
	for _, t := range each.Tensors {
		srcs = append(srcs, gpu.Source{Name: t.Tensor.Name, R: t.Assembly, Off: 0, Len: t.Size()})
		out.Tensors = append(out.Tensors, StagedTensor{Name: t.Tensor.Name, DType: string(t.Tensor.DType), Shape: t.Shape, Bytes: t.Size()})
	}
	lease, err := a.opts.Stager.Stage(r.Context(), dev, srcs, gpu.StageOptions{Handover: how, Hold: req.Hold})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	// Owned before anyone is told its id: from here on only its stager
	// (or the operator) can list, renew or release it.
	a.owners.add(lease.ID, peerOf(r), a.opts.Stager.Leases)
	if r.Context().Err() != nil {
		// The client left while its lease was being made: nobody will ever
		// know its id, so nothing would release it before its TTL.
		a.drop(lease.ID, "its client left before the answer")
		return
	}
	for i, p := range lease.Placements {
		out.Tensors[i].Offset = p.Offset
	}
	out.Lease, out.Device, out.DeviceUUID, out.Bytes = lease.ID, lease.Device, lease.DeviceUUID, lease.Bytes
	out.Handover, out.Held, out.Expires = lease.Handover.String(), lease.Held, expires(*lease)
	out.GPUDirectRDMACapable = lease.GPUDirectRDMA
	if lease.Handover == gpu.HandoverIPC {
		out.IPCHandle = base64.StdEncoding.EncodeToString(lease.IPCHandle)
	}
	out.Seconds = lease.Elapsed.Seconds()
	if out.Seconds > 0 {
		out.GBps = float64(lease.Bytes) / out.Seconds / 1e9
	}
	if lease.Handover == gpu.HandoverFD || lease.Held {
		if !a.handOver(w, r, lease, out) {
			return
		}
	} else if err := writeAnswer(w, out); err != nil {
		a.drop(lease.ID, "its answer could not be delivered")
		return
	}
	if a.opts.OnStage != nil {
		a.opts.OnStage(lease.Bytes, out.Seconds)
	}
}

// writeAnswer writes v as the 200 answer and flushes it, so that a client
// that is gone shows up as an error here rather than as a lease nobody
// knows of.
func writeAnswer(w http.ResponseWriter, v any) error {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(append(body, '\n')); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

// drop releases a lease whose consumer never got it.
func (a *admin) drop(id, why string) {
	defer a.owners.forget(id)
	if err := a.opts.Stager.Release(id); err != nil {
		a.log.Warn("gpu: releasing an undelivered lease", "lease", id, "err", err)
		return
	}
	a.log.Info("gpu: lease released: "+why, "lease", id)
}

// device resolves a request's device to this process's ordinal.
func (a *admin) device(ref DeviceRef) (int, error) {
	if ref == "" {
		return 0, nil
	}
	devs, err := a.opts.Stager.Devices()
	if err != nil {
		return 0, err
	}
	return gpu.FindDevice(devs, string(ref))
}

// handoverFor reads a request's handover. A file descriptor can only
// travel over a Unix socket, so "auto" means "ipc" on any other listener
// and "fd" is refused there.
func handoverFor(r *http.Request, s string) (gpu.Handover, error) {
	how, ok := gpu.ParseHandover(s)
	if !ok {
		return how, &requestError{`handover: want "auto", "fd" or "ipc"`}
	}
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	_, unixSocket := addr.(*net.UnixAddr)
	canPass := unixSocket && fdPassing
	switch {
	case how == gpu.HandoverAuto && !canPass:
		return gpu.HandoverIPC, nil
	case how == gpu.HandoverFD && !canPass:
		return how, &requestError{`handover "fd" passes a file descriptor, which needs the admin API on a Unix socket (admin-listen unix://…)`}
	}
	return how, nil
}
