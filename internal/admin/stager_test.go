package admin_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/gpu"
)

// fakeStager "stages" into host memory: one buffer per lease, sources packed
// at 256-byte alignment, read concurrently as the real copier reads them.
// Its devices default to one, with VMM; a lease's "file descriptor" is a
// file holding "fd of <lease id>", so that a test can tell which lease a
// descriptor it received belongs to.
type fakeStager struct {
	mu     sync.Mutex
	leases map[string]*gpu.Lease
	mem    map[string][]byte
	// Optional.
	devs     []gpu.Device
	staged   []int // the device of each Stage call
	released []string
	// beforeLease, when set, runs in Stage once the bytes are read, before
	// the lease exists; its error fails the staging.
	beforeLease func(ctx context.Context) error
	n           int
	dir         string // where ExportFD's files go; a temp dir if empty
}

func (f *fakeStager) Available() bool { return true }

func (f *fakeStager) Devices() ([]gpu.Device, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.devs == nil {
		return []gpu.Device{{Index: 0, Name: "Fake GPU", UUID: "GPU-00000000-0000-0000-0000-000000000001",
			PCIBusID: "0000:3b:00.0", NUMANode: -1, Handover: gpu.HandoverFD, TotalBytes: 1 << 30, FreeBytes: -1, Health: gpu.HealthOK}}, nil
	}
	return append([]gpu.Device(nil), f.devs...), nil
}

func (f *fakeStager) Stage(ctx context.Context, device int, srcs []gpu.Source, opts gpu.StageOptions) (*gpu.Lease, error) {
	devs, _ := f.Devices()
	if device < 0 || device >= len(devs) {
		return nil, gpu.ErrBadDevice
	}
	d := devs[device]
	if d.Health != gpu.HealthOK {
		return nil, fmt.Errorf("%w: device %d is %s", gpu.ErrDeviceFailed, device, d.Health)
	}
	how := opts.Handover
	if how == gpu.HandoverAuto {
		how = d.Handover
	}
	l := &gpu.Lease{Device: device, DeviceUUID: d.UUID, Handover: how, Held: opts.Hold}
	if how == gpu.HandoverIPC {
		l.IPCHandle = make([]byte, 64)
	}
	if !opts.Hold {
		l.Expires = time.Now().Add(time.Minute)
	}
	var off int64
	for _, s := range srcs {
		l.Placements = append(l.Placements, gpu.Placement{Name: s.Name, Offset: off, Len: s.Len})
		off = (off + s.Len + 255) &^ 255
	}
	mem := make([]byte, off)
	var wg sync.WaitGroup
	errs := make([]error, len(srcs))
	for i, s := range srcs {
		wg.Go(func() { // halves in parallel, like the pinned-buffer pipeline
			p := l.Placements[i]
			half := s.Len / 2
			if _, err := s.R.ReadAt(mem[p.Offset+half:p.Offset+s.Len], s.Off+half); err != nil && err != io.EOF {
				errs[i] = err
			}
			if _, err := s.R.ReadAt(mem[p.Offset:p.Offset+half], s.Off); err != nil && err != io.EOF {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, &gpu.SourceError{Err: err}
		}
	}
	f.mu.Lock()
	before := f.beforeLease
	f.mu.Unlock()
	if before != nil {
		if err := before(ctx); err != nil {
			return nil, err
		}
	}
	l.Bytes = off
	l.Elapsed = time.Millisecond
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	l.ID = fmt.Sprintf("lease-%d", f.n)
	f.staged = append(f.staged, device)
	f.leases[l.ID], f.mem[l.ID] = l, mem
	return l, nil
}

func (f *fakeStager) ExportFD(id string) (*os.File, error) {
	f.mu.Lock()
	l, ok := f.leases[id]
	f.mu.Unlock()
	if !ok {
		return nil, gpu.ErrUnknownLease
	}
	if l.Handover != gpu.HandoverFD {
		return nil, gpu.ErrBadRequest
	}
	file, err := os.CreateTemp(f.dir, "fd")
	if err != nil {
		return nil, err
	}
	os.Remove(file.Name())
	if _, err := file.WriteString("fd of " + id); err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

func (f *fakeStager) Leases() []gpu.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []gpu.Lease
	for _, l := range f.leases {
		out = append(out, *l)
	}
	return out
}

func (f *fakeStager) Renew(id string) (gpu.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.leases[id]
	if !ok {
		return gpu.Lease{}, fmt.Errorf("%w: %q", gpu.ErrUnknownLease, id)
	}
	if !l.Held {
		l.Expires = time.Now().Add(time.Hour)
	}
	return *l, nil
}

func (f *fakeStager) Release(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.leases[id]; !ok {
		return gpu.ErrUnknownLease
	}
	delete(f.leases, id)
	delete(f.mem, id)
	f.released = append(f.released, id)
	return nil
}

// wasReleased reports whether Release freed the lease.
func (f *fakeStager) wasReleased(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.released {
		if r == id {
			return true
		}
	}
	return false
}
