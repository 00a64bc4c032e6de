package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/gpu"
)

// GPU staging in the access model: POST /gpu/stage on node A's admin API
// stages a tensor for whoever sent it, checked upstream with the caller's
// own Authorization, as the tensor route is. A lease is content: the model
// judges it as it judges GET /models/{repo}/tensors/{name}, with the bytes
// the (fake) GPU was given as the body, the lease's commit as
// X-Repo-Commit, and its dtype and shape as the tensor headers.

// modelStager is a GPU copier that copies to host memory: it records the
// bytes each lease was given, for the model to compare with the tensor's.
type modelStager struct {
	mu     sync.Mutex
	n      int
	leases map[string]*gpu.Lease
	mem    map[string][]byte
}

func newModelStager() *modelStager {
	return &modelStager{leases: map[string]*gpu.Lease{}, mem: map[string][]byte{}}
}

var _ admin.Stager = (*modelStager)(nil)

func (f *modelStager) Available() bool { return true }

func (f *modelStager) Devices() ([]gpu.Device, error) {
	return []gpu.Device{{Index: 0, Name: "model GPU", UUID: "GPU-00000000-0000-0000-0000-00000000a11c",
		PCIBusID: "0000:3b:00.0", NUMANode: -1, Handover: gpu.HandoverIPC, TotalBytes: 1 << 30, FreeBytes: -1, Health: gpu.HealthOK}}, nil
}

func (f *modelStager) Stage(_ context.Context, device int, srcs []gpu.Source, opts gpu.StageOptions) (*gpu.Lease, error) {
	if device != 0 {
		return nil, gpu.ErrBadDevice
	}
	l := &gpu.Lease{Device: device, DeviceUUID: "GPU-00000000-0000-0000-0000-00000000a11c", Handover: gpu.HandoverIPC,
		IPCHandle: make([]byte, 64), Held: opts.Hold, Elapsed: time.Millisecond}
	if !opts.Hold {
		l.Expires = time.Now().Add(time.Minute)
	}
	var off int64
	for _, s := range srcs {
		l.Placements = append(l.Placements, gpu.Placement{Name: s.Name, Offset: off, Len: s.Len})
		off = (off + s.Len + 255) &^ 255
	}
	mem := make([]byte, off)
	for i, s := range srcs {
		p := l.Placements[i]
		if n, err := s.R.ReadAt(mem[p.Offset:p.Offset+s.Len], s.Off); err != nil && !(err == io.EOF && int64(n) == s.Len) {
			return nil, &gpu.SourceError{Name: s.Name, Off: s.Off, Err: err}
		}
	}
	l.Bytes = off
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	l.ID = fmt.Sprintf("lease-%d", f.n)
	f.leases[l.ID], f.mem[l.ID] = l, mem
	return l, nil
}

func (f *modelStager) ExportFD(string) (*os.File, error) { return nil, gpu.ErrBadRequest } // IPC only

func (f *modelStager) Leases() []gpu.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]gpu.Lease, 0, len(f.leases))
	for _, l := range f.leases {
		out = append(out, *l)
	}
	return out
}

func (f *modelStager) Renew(id string) (gpu.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.leases[id]
	if !ok {
		return gpu.Lease{}, fmt.Errorf("%w: %q", gpu.ErrUnknownLease, id)
	}
	return *l, nil
}

func (f *modelStager) Release(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.leases, id)
	delete(f.mem, id)
	return nil
}

// take is the memory of lease id, which it ends; nil if there is none.
func (f *modelStager) take(id string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	mem := f.mem[id]
	delete(f.leases, id)
	delete(f.mem, id)
	return mem
}

// stageRequest makes req the staging of tensor name of repo at rev, on node
// A's admin API, with the caller's token (do sends it).
func (w *modelWorld) stageRequest(req *modelReq, repo, rev, name string) {
	req.node, req.route, req.method, req.url = nodeAdmin, routeTensor, http.MethodPost, "/gpu/stage"
	req.names = []string{name}
	body := map[string]any{"repo": repo, "names": req.names}
	if req.rev.kind != revMain {
		body["revision"] = rev // main is the default
	}
	req.body, _ = json.Marshal(body)
	req.header.Set("Content-Type", "application/json")
}

// staged turns a staging's answer into the tensor route's: a lease becomes
// a 200 whose body is the bytes the GPU was given, with the lease's commit
// and the tensor's dtype and shape as headers; anything else is left as
// it came (a refusal, a failure). What makes a lease malformed is a wrong
// answer of its own.
func (w *modelWorld) staged(req *modelReq, ans *modelAnswer) (*modelAnswer, []modelVerdict) {
	if ans.status != http.StatusOK {
		return ans, nil
	}
	out := &modelAnswer{status: ans.status, header: http.Header{}, err: ans.err}
	var resp admin.StageResponse
	if err := json.Unmarshal(ans.body, &resp); err != nil {
		if ans.err != nil {
			return out, nil // cut short: check judges whether the caller may have had it
		}
		return out, []modelVerdict{wrong("stage", "a %d answer that is not a lease: %v", ans.status, err)}
	}
	var vs []modelVerdict
	mem := w.stager.take(resp.Lease)
	switch {
	case mem == nil:
		vs = append(vs, wrong("stage", "lease %q is none the GPU made", resp.Lease))
	case len(resp.Tensors) != 1 || resp.Tensors[0].Name != req.names[0]:
		vs = append(vs, wrong("stage", "a lease of tensors %+v, for %v", resp.Tensors, req.names))
	default:
		t := resp.Tensors[0]
		if t.Offset < 0 || t.Bytes < 0 || t.Offset+t.Bytes > int64(len(mem)) {
			vs = append(vs, wrong("stage", "tensor %s at %d+%d in a %d-byte lease", t.Name, t.Offset, t.Bytes, len(mem)))
			break
		}
		out.body = mem[t.Offset : t.Offset+t.Bytes]
		out.header.Set("X-Tensor-Dtype", t.DType)
		dims := make([]string, len(t.Shape))
		for i, d := range t.Shape {
			dims[i] = strconv.FormatUint(d, 10)
		}
		out.header.Set("X-Tensor-Shape", "["+strings.Join(dims, ",")+"]")
	}
	if resp.Commit == "" {
		vs = append(vs, wrong("stage", "a lease that names no commit"))
	}
	out.header.Set("X-Repo-Commit", resp.Commit)
	return out, vs
}
