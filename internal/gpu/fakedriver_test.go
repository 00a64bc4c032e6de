package gpu

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// fakeDriver is the driver interface in plain Go, so that the copier's
// leases, budget, pool and pipeline are tested under go test -race without
// cgo or the cuda tag. The C fake (testdata/fakecuda) still proves the cgo
// boundary; this one is for logic, and is stricter about it:
//
//   - Device memory is a Go byte slice per allocation, filled with garbage,
//     behind device pointers that are never reused, so a stale pointer is
//     caught rather than silently hitting newer memory. Allocations are
//     rounded up to a granularity (2 MiB unless configured), as the real
//     allocator does, and memInfo reports what that leaves free.
//   - Copies are asynchronous in the most hostile legal way: copyAsync only
//     queues, and a queued copy runs (reading its pinned source then) only
//     when something waits for it: wait on an event recorded after it, or
//     syncStream. A buffer refilled before its copy was waited for lands
//     the wrong bytes on the device, every time, and the race detector
//     sees the refill race the copy.
//   - Every call is checked for misuse: calls on a device that is not
//     attached, use of freed or unknown device memory, frees of it (double
//     or wild), copies out of bounds, async copies from memory hostAlloc
//     did not return, hostFree of unknown memory, freeing memory a queued
//     copy still touches, reading memory a queued copy still writes, and
//     detaching a device that still owns memory or queued work. A misuse
//     is recorded and the call fails, but for reads under a queued copy,
//     which on a GPU are a data race rather than an error.
//   - Calls are counted per method, and failures can be injected per
//     method and device on the n-th call, for a number of calls or for
//     good. A sticky failure kills the device's context the way an
//     asynchronous fault does in CUDA: its queued work is dropped and every
//     later call on the device fails with the same code until detach, which
//     ends the dead context and everything allocated in it.
//   - checkAtEnd reports misuse and leaks (device memory, pinned and
//     pageable buffers, attached devices) when the test ends.
//
// Errors are *DriverError naming the CUDA entry point behind each method,
// as the cgo driver's are, so tests read the same either way.
type fakeDriver struct {
	cfg fakeConfig

	mu sync.Mutex
	// Guarded by mu.
	devs      []*fakeDevice
	calls     map[string]int
	faults    []*fakeFault
	hooks     map[string]func(dev int)
	allocs    map[uint64]*fakeAlloc // live device memory by base pointer
	freed     map[uint64]int64      // freed device memory: base to rounded size
	hosts     map[uintptr]*fakeHost // live pinned buffers by address
	pageables map[uintptr]int       // live pageable buffers by address
	nextID    uint64
	misuses   []string
}

// fakeConfig sizes the fake's devices. Zero fields take the defaults.
type fakeConfig struct {
	devices     int   // default 1
	total       int64 // bytes per device; default 1 GiB
	granularity int64 // allocations are rounded up to a multiple; default 2 MiB
}

// fakeFault makes calls of one method fail. The zero dev is device 0; use
// anyDevice to match every call, including those that name no device.
type fakeFault struct {
	method string // driver method, e.g. "alloc"
	dev    int
	after  int  // matching calls that succeed first: the fault hits call after+1
	times  int  // matching calls that fail then; 0 means 1, -1 means all later ones
	code   int  // CUresult, e.g. cudaErrorIllegalAddress
	sticky bool // the device's context dies with the first failure
}

const anyDevice = -1

type fakeDevice struct {
	attached bool
	dead     int   // CUresult of the sticky fault that killed the context; 0 while healthy
	used     int64 // allocated bytes, rounded to the granularity
	next     uint64
	streams  [][]*fakeCopy // queued copies per stream, in order
	events   []fakeEvent
	seq      uint64 // numbers queued copies in issue order
}

// fakeEvent is the last record of an event: it completes when the copies
// queued on stream up to seq have run.
type fakeEvent struct {
	stream int
	seq    uint64
}

type fakeCopy struct {
	seq  uint64
	dst  *fakeAlloc
	off  int64
	src  []byte // pinned memory, read when the copy runs
	host *fakeHost
}

type fakeAlloc struct {
	dev     int
	base    uint64
	n       int64 // requested size; copies past it are misuse
	rounded int64 // what it takes from the device
	mem     []byte
	id      uint64
	queued  int // copies into it not yet run
}

type fakeHost struct {
	dev    int // device whose context allocated it
	mem    []byte
	queued int // copies from it not yet run
}

func newFakeDriver(cfg fakeConfig) *fakeDriver {
	if cfg.devices == 0 {
		cfg.devices = 1
	}
	if cfg.total == 0 {
		cfg.total = 1 << 30
	}
	if cfg.granularity == 0 {
		cfg.granularity = 2 << 20
	}
	f := &fakeDriver{
		cfg:       cfg,
		calls:     make(map[string]int),
		hooks:     make(map[string]func(int)),
		allocs:    make(map[uint64]*fakeAlloc),
		freed:     make(map[uint64]int64),
		hosts:     make(map[uintptr]*fakeHost),
		pageables: make(map[uintptr]int),
	}
	for i := range cfg.devices {
		// Each device's pointers live in their own range, far apart.
		f.devs = append(f.devs, &fakeDevice{next: uint64(i+1) << 40})
	}
	return f
}

// checkAtEnd makes t fail, once the test and its later-registered
// cleanups are done, for every misuse and leak the fake saw.
func (f *fakeDriver) checkAtEnd(t testing.TB) {
	t.Cleanup(func() {
		for _, m := range f.misused() {
			t.Errorf("fake driver: misuse: %s", m)
		}
		for _, l := range f.leaks() {
			t.Errorf("fake driver: leak: %s", l)
		}
	})
}

// cudaCall names the CUDA entry point behind a driver method, as the cgo
// driver reports it in DriverError.Call.
func cudaCall(method string) string {
	switch method {
	case "deviceName":
		return "cuDeviceGetName"
	case "deviceTotal":
		return "cuDeviceTotalMem_v2"
	case "attach":
		return "cuDevicePrimaryCtxRetain"
	case "detach":
		return "cuDevicePrimaryCtxRelease_v2"
	case "memInfo":
		return "cuMemGetInfo_v2"
	case "alloc":
		return "cuMemAlloc_v2"
	case "free":
		return "cuMemFree_v2"
	case "ipcHandle":
		return "cuIpcGetMemHandle"
	case "hostAlloc":
		return "cuMemHostAlloc"
	case "hostFree":
		return "cuMemFreeHost"
	case "copyAsync":
		return "cuMemcpyHtoDAsync_v2"
	case "record":
		return "cuEventRecord"
	case "wait":
		return "cuEventSynchronize"
	case "syncStream":
		return "cuStreamSynchronize"
	case "copyToHost":
		return "cuMemcpyDtoH_v2"
	case "copyToDevice":
		return "cuMemcpyHtoD_v2"
	case "pageable":
		return "malloc"
	case "freePageable":
		return "free"
	}
	panic("fake driver: no method " + method)
}

// fakeError is the error a method returns with code, named the way
// cuGetErrorName names it.
func fakeError(method string, code int) error {
	var name string
	switch code {
	case cudaErrorInvalidValue:
		name = "CUDA_ERROR_INVALID_VALUE"
	case cudaErrorOutOfMemory:
		name = cudaErrorOutOfMemoryName
	case cudaErrorInvalidDevice:
		name = "CUDA_ERROR_INVALID_DEVICE"
	case cudaErrorInvalidContext:
		name = "CUDA_ERROR_INVALID_CONTEXT"
	case cudaErrorInvalidHandle:
		name = "CUDA_ERROR_INVALID_HANDLE"
	case cudaErrorIllegalAddress:
		name = "CUDA_ERROR_ILLEGAL_ADDRESS"
	case cudaErrorUnknown:
		name = "CUDA_ERROR_UNKNOWN"
	default:
		name = fmt.Sprintf("CUresult(%d)", code)
	}
	return &DriverError{Call: cudaCall(method), Code: code, Name: name}
}

// ---- test controls ----

// inject adds a fault. Faults are matched in the order they were added.
func (f *fakeDriver) inject(ft fakeFault) {
	cudaCall(ft.method) // panics on a misspelt method
	if ft.times == 0 {
		ft.times = 1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, &ft)
}

// hook runs fn at the start of every call of method, after it is counted
// and before anything else, without the fake's lock: fn may block to hold
// a caller at that point. nil removes it.
func (f *fakeDriver) hook(method string, fn func(dev int)) {
	cudaCall(method)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hooks[method] = fn
}

// count returns how many calls of method were made, failed ones included.
func (f *fakeDriver) count(method string) int {
	cudaCall(method)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// misused returns the misuses seen so far.
func (f *fakeDriver) misused() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.misuses)
}

// fakeLive counts what the fake holds now.
type fakeLive struct {
	allocs, pinned, pageable, attached, queued int
}

func (f *fakeDriver) live() fakeLive {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := fakeLive{allocs: len(f.allocs), pinned: len(f.hosts), pageable: len(f.pageables)}
	for _, d := range f.devs {
		if d.attached {
			l.attached++
		}
		for _, q := range d.streams {
			l.queued += len(q)
		}
	}
	return l
}

// leaks describes everything still allocated or attached.
func (f *fakeDriver) leaks() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.allocs {
		out = append(out, fmt.Sprintf("device %d: %d bytes at %#x", a.dev, a.n, a.base))
	}
	for _, h := range f.hosts {
		out = append(out, fmt.Sprintf("pinned buffer of %d bytes (device %d's context)", len(h.mem), h.dev))
	}
	for _, n := range f.pageables {
		out = append(out, fmt.Sprintf("pageable buffer of %d bytes", n))
	}
	for i, d := range f.devs {
		if d.attached {
			out = append(out, fmt.Sprintf("device %d still attached", i))
		}
	}
	slices.Sort(out)
	return out
}

// queuedFrom returns how many queued copies read from pinned memory that
// overlaps b.
func (f *fakeDriver) queuedFrom(b []byte) int {
	lo, hi := span(b)
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, d := range f.devs {
		for _, q := range d.streams {
			for _, c := range q {
				if clo, chi := span(c.src); clo < hi && lo < chi {
					n++
				}
			}
		}
	}
	return n
}

// queuedInto returns how many queued copies write device memory at dptr.
func (f *fakeDriver) queuedInto(dptr uint64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a := f.allocs[dptr]; a != nil {
		return a.queued
	}
	return 0
}

// ipcRead reads device memory through an IPC handle, as a consumer that
// imported it would.
func (f *fakeDriver) ipcRead(handle []byte, off int64, p []byte) error {
	if len(handle) != 64 || string(handle[:8]) != "GOFAKEIP" {
		return fmt.Errorf("not a fake IPC handle")
	}
	id := binary.LittleEndian.Uint64(handle[8:])
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.allocs {
		if a.id != id {
			continue
		}
		if off < 0 || off > a.n || int64(len(p)) > a.n-off {
			return fmt.Errorf("read of %d bytes at %d outside %d", len(p), off, a.n)
		}
		if a.queued > 0 {
			f.misuse("IPC read of %#x while %d copies into it are queued", a.base, a.queued)
		}
		copy(p, a.mem[off:])
		return nil
	}
	return fmt.Errorf("IPC handle names no live allocation")
}

// ---- the driver interface ----

// begin counts a call, runs its hook, and applies sticky death and
// injected faults. It returns with f.mu held, whatever the result.
func (f *fakeDriver) begin(method string, dev int) error {
	f.mu.Lock()
	f.calls[method]++
	hook := f.hooks[method]
	f.mu.Unlock()
	if hook != nil {
		hook(dev)
	}
	f.mu.Lock()
	if dev >= 0 && dev < len(f.devs) && f.devs[dev].dead != 0 && method != "detach" {
		return fakeError(method, f.devs[dev].dead)
	}
	for _, ft := range f.faults {
		if ft.method != method || ft.times == 0 || (ft.dev != anyDevice && ft.dev != dev) {
			continue
		}
		if ft.after > 0 {
			ft.after--
			continue
		}
		if ft.times > 0 {
			ft.times--
		}
		if ft.sticky && dev >= 0 && dev < len(f.devs) {
			f.kill(dev, ft.code)
		}
		return fakeError(method, ft.code)
	}
	return nil
}

func (f *fakeDriver) misuse(format string, args ...any) {
	f.misuses = append(f.misuses, fmt.Sprintf(format, args...))
}

// kill marks dev's context dead: its queued work never runs.
func (f *fakeDriver) kill(dev, code int) {
	d := f.devs[dev]
	d.dead = code
	for s, q := range d.streams {
		for _, c := range q {
			c.dst.queued--
			c.host.queued--
		}
		d.streams[s] = nil
	}
}

// device returns dev if it exists and is attached; otherwise it records
// the misuse and returns the error for method.
func (f *fakeDriver) device(method string, dev int) (*fakeDevice, error) {
	if dev < 0 || dev >= len(f.devs) {
		f.misuse("%s on device %d, which does not exist", method, dev)
		return nil, fakeError(method, cudaErrorInvalidDevice)
	}
	d := f.devs[dev]
	if !d.attached {
		f.misuse("%s on device %d, which is not attached", method, dev)
		return nil, fakeError(method, cudaErrorInvalidContext)
	}
	return d, nil
}

// findAlloc finds the live allocation holding [p, p+n) on dev, or records the
// misuse and returns the error for method.
func (f *fakeDriver) findAlloc(method string, dev int, p uint64, n int64) (*fakeAlloc, error) {
	for _, a := range f.allocs {
		if p >= a.base && p < a.base+uint64(a.n) {
			switch {
			case a.dev != dev:
				f.misuse("%s of device %d memory at %#x through device %d", method, a.dev, p, dev)
				return nil, fakeError(method, cudaErrorInvalidValue)
			case n < 0 || int64(p-a.base)+n > a.n:
				f.misuse("%s of %d bytes at offset %d overruns an allocation of %d", method, n, p-a.base, a.n)
				return nil, fakeError(method, cudaErrorInvalidValue)
			}
			return a, nil
		}
	}
	if f.isFreed(p) {
		f.misuse("%s of device memory at %#x after it was freed", method, p)
	} else {
		f.misuse("%s of device memory at %#x that was never allocated", method, p)
	}
	return nil, fakeError(method, cudaErrorInvalidValue)
}

// isFreed reports whether p falls in memory that was freed. Pointers are
// never reused, so a freed range stays freed.
func (f *fakeDriver) isFreed(p uint64) bool {
	for base, n := range f.freed {
		if p >= base && p-base < uint64(n) {
			return true
		}
	}
	return false
}

func (f *fakeDriver) deviceCount() int { return len(f.devs) }

func (f *fakeDriver) deviceName(dev int) (string, error) {
	err := f.begin("deviceName", dev)
	defer f.mu.Unlock()
	if err != nil {
		return "", err
	}
	if dev < 0 || dev >= len(f.devs) {
		f.misuse("deviceName of device %d, which does not exist", dev)
		return "", fakeError("deviceName", cudaErrorInvalidDevice)
	}
	return fmt.Sprintf("Go Fake Device %d", dev), nil
}

func (f *fakeDriver) deviceTotal(dev int) (int64, error) {
	err := f.begin("deviceTotal", dev)
	defer f.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if dev < 0 || dev >= len(f.devs) {
		f.misuse("deviceTotal of device %d, which does not exist", dev)
		return 0, fakeError("deviceTotal", cudaErrorInvalidDevice)
	}
	return f.cfg.total, nil
}

func (f *fakeDriver) attach(dev, streams, events int) error {
	err := f.begin("attach", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	if dev < 0 || dev >= len(f.devs) {
		f.misuse("attach of device %d, which does not exist", dev)
		return fakeError("attach", cudaErrorInvalidDevice)
	}
	d := f.devs[dev]
	switch {
	case d.attached:
		f.misuse("attach of device %d, which is already attached", dev)
		return fakeError("attach", cudaErrorInvalidContext)
	case streams < 1 || events < 1:
		f.misuse("attach of device %d with %d streams and %d events", dev, streams, events)
		return fakeError("attach", cudaErrorInvalidValue)
	}
	d.attached = true
	d.streams = make([][]*fakeCopy, streams)
	d.events = make([]fakeEvent, events)
	return nil
}

// detach ends the device's context. A dead context takes everything
// allocated in it along; a healthy one must own nothing by then.
func (f *fakeDriver) detach(dev int) error {
	err := f.begin("detach", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("detach", dev)
	if err != nil {
		return err
	}
	if d.dead == 0 {
		var owned []string
		for _, a := range f.allocs {
			if a.dev == dev {
				owned = append(owned, fmt.Sprintf("%d bytes still allocated at %#x", a.n, a.base))
			}
		}
		for _, h := range f.hosts {
			if h.dev == dev {
				owned = append(owned, fmt.Sprintf("a pinned buffer of %d bytes made in its context", len(h.mem)))
			}
		}
		for s, q := range d.streams {
			if len(q) > 0 {
				owned = append(owned, fmt.Sprintf("%d copies queued on stream %d", len(q), s))
			}
		}
		if len(owned) > 0 {
			slices.Sort(owned)
			f.misuse("detach of device %d with %s", dev, strings.Join(owned, ", "))
			return fakeError("detach", cudaErrorInvalidContext)
		}
	}
	for base, a := range f.allocs {
		if a.dev == dev {
			delete(f.allocs, base)
			f.freed[base] = a.rounded
		}
	}
	for p, h := range f.hosts {
		if h.dev == dev {
			delete(f.hosts, p)
		}
	}
	*d = fakeDevice{next: d.next} // pointers stay unique across attachments
	return nil
}

func (f *fakeDriver) memInfo(dev int) (int64, int64, error) {
	err := f.begin("memInfo", dev)
	defer f.mu.Unlock()
	if err != nil {
		return 0, 0, err
	}
	d, err := f.device("memInfo", dev)
	if err != nil {
		return 0, 0, err
	}
	return f.cfg.total - d.used, f.cfg.total, nil
}

func (f *fakeDriver) alloc(dev int, n int64) (uint64, error) {
	err := f.begin("alloc", dev)
	defer f.mu.Unlock()
	if err != nil {
		return 0, err
	}
	d, err := f.device("alloc", dev)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		f.misuse("alloc of %d bytes on device %d", n, dev)
		return 0, fakeError("alloc", cudaErrorInvalidValue)
	}
	rounded := alignUp(n, f.cfg.granularity)
	if rounded > f.cfg.total-d.used {
		return 0, fakeError("alloc", cudaErrorOutOfMemory)
	}
	f.nextID++
	a := &fakeAlloc{dev: dev, base: d.next, n: n, rounded: rounded, mem: make([]byte, n), id: f.nextID}
	for i := range a.mem {
		a.mem[i] = 0xA5 // device memory starts as garbage
	}
	d.next += uint64(rounded)
	d.used += rounded
	f.allocs[a.base] = a
	return a.base, nil
}

func (f *fakeDriver) free(dev int, p uint64) error {
	err := f.begin("free", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("free", dev)
	if err != nil {
		return err
	}
	a := f.allocs[p]
	switch {
	case a == nil && f.freed[p] > 0:
		f.misuse("double free of device memory at %#x", p)
		return fakeError("free", cudaErrorInvalidValue)
	case a == nil:
		f.misuse("free of device memory at %#x that was never allocated", p)
		return fakeError("free", cudaErrorInvalidValue)
	case a.dev != dev:
		f.misuse("free of device %d memory through device %d", a.dev, dev)
		return fakeError("free", cudaErrorInvalidContext)
	case a.queued > 0:
		f.misuse("free of device memory at %#x with %d copies into it still queued", p, a.queued)
		return fakeError("free", cudaErrorInvalidValue)
	}
	delete(f.allocs, p)
	f.freed[p] = a.rounded
	d.used -= a.rounded
	return nil
}

func (f *fakeDriver) ipcHandle(dev int, p uint64) ([]byte, error) {
	err := f.begin("ipcHandle", dev)
	defer f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, err := f.device("ipcHandle", dev); err != nil {
		return nil, err
	}
	a, err := f.findAlloc("ipcHandle", dev, p, 0)
	if err != nil {
		return nil, err
	}
	if a.base != p {
		f.misuse("ipcHandle of %#x, inside an allocation at %#x", p, a.base)
		return nil, fakeError("ipcHandle", cudaErrorInvalidValue)
	}
	h := make([]byte, 64)
	copy(h, "GOFAKEIP")
	binary.LittleEndian.PutUint64(h[8:], a.id)
	return h, nil
}

func (f *fakeDriver) hostAlloc(dev int, n int64) ([]byte, error) {
	err := f.begin("hostAlloc", dev)
	defer f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, err := f.device("hostAlloc", dev); err != nil {
		return nil, err
	}
	if n <= 0 {
		f.misuse("hostAlloc of %d bytes", n)
		return nil, fakeError("hostAlloc", cudaErrorInvalidValue)
	}
	b := make([]byte, n)
	lo, _ := span(b)
	f.hosts[lo] = &fakeHost{dev: dev, mem: b}
	return b, nil
}

func (f *fakeDriver) hostFree(dev int, b []byte) error {
	err := f.begin("hostFree", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := f.device("hostFree", dev); err != nil {
		return err
	}
	lo, _ := span(b)
	h := f.hosts[lo]
	switch {
	case h == nil:
		f.misuse("hostFree of %d bytes hostAlloc did not return (or already freed)", len(b))
		return fakeError("hostFree", cudaErrorInvalidValue)
	case h.queued > 0:
		f.misuse("hostFree of a pinned buffer with %d copies from it still queued", h.queued)
		return fakeError("hostFree", cudaErrorInvalidValue)
	}
	delete(f.hosts, lo)
	return nil
}

func (f *fakeDriver) copyAsync(dev, stream int, dst uint64, src []byte) error {
	err := f.begin("copyAsync", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("copyAsync", dev)
	if err != nil {
		return err
	}
	if stream < 0 || stream >= len(d.streams) {
		f.misuse("copyAsync on stream %d of %d", stream, len(d.streams))
		return fakeError("copyAsync", cudaErrorInvalidHandle)
	}
	a, err := f.findAlloc("copyAsync", dev, dst, int64(len(src)))
	if err != nil {
		return err
	}
	h := f.pinnedHolding(src)
	if h == nil {
		f.misuse("copyAsync from %d bytes of host memory that is not pinned", len(src))
		return fakeError("copyAsync", cudaErrorInvalidValue)
	}
	d.seq++
	d.streams[stream] = append(d.streams[stream], &fakeCopy{seq: d.seq, dst: a, off: int64(dst - a.base), src: src, host: h})
	a.queued++
	h.queued++
	return nil
}

// pinnedHolding returns the pinned buffer that contains all of b.
func (f *fakeDriver) pinnedHolding(b []byte) *fakeHost {
	lo, hi := span(b)
	for base, h := range f.hosts {
		if lo >= base && hi <= base+uintptr(len(h.mem)) {
			return h
		}
	}
	return nil
}

func (f *fakeDriver) record(dev, event, stream int) error {
	err := f.begin("record", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("record", dev)
	if err != nil {
		return err
	}
	if event < 0 || event >= len(d.events) || stream < 0 || stream >= len(d.streams) {
		f.misuse("record of event %d of %d on stream %d of %d", event, len(d.events), stream, len(d.streams))
		return fakeError("record", cudaErrorInvalidHandle)
	}
	d.events[event] = fakeEvent{stream: stream, seq: d.seq}
	return nil
}

func (f *fakeDriver) wait(dev, event int) error {
	err := f.begin("wait", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("wait", dev)
	if err != nil {
		return err
	}
	if event < 0 || event >= len(d.events) {
		f.misuse("wait on event %d of %d", event, len(d.events))
		return fakeError("wait", cudaErrorInvalidHandle)
	}
	e := d.events[event]
	f.run(d, e.stream, e.seq) // an event never recorded has seq 0: done
	return nil
}

func (f *fakeDriver) syncStream(dev, stream int) error {
	err := f.begin("syncStream", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("syncStream", dev)
	if err != nil {
		return err
	}
	if stream < 0 || stream >= len(d.streams) {
		f.misuse("syncStream of stream %d of %d", stream, len(d.streams))
		return fakeError("syncStream", cudaErrorInvalidHandle)
	}
	f.run(d, stream, d.seq)
	return nil
}

// run performs the copies queued on a stream up to seq, in order.
func (f *fakeDriver) run(d *fakeDevice, stream int, seq uint64) {
	q := d.streams[stream]
	for len(q) > 0 && q[0].seq <= seq {
		c := q[0]
		copy(c.dst.mem[c.off:], c.src)
		c.dst.queued--
		c.host.queued--
		q = q[1:]
	}
	d.streams[stream] = q
}

func (f *fakeDriver) copyToHost(dev int, dst []byte, src uint64) error {
	err := f.begin("copyToHost", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := f.device("copyToHost", dev); err != nil {
		return err
	}
	a, err := f.findAlloc("copyToHost", dev, src, int64(len(dst)))
	if err != nil {
		return err
	}
	if a.queued > 0 {
		f.misuse("copyToHost from %#x while %d copies into it are queued", a.base, a.queued)
	}
	copy(dst, a.mem[src-a.base:])
	return nil
}

func (f *fakeDriver) copyToDevice(dev int, dst uint64, src []byte) error {
	err := f.begin("copyToDevice", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := f.device("copyToDevice", dev); err != nil {
		return err
	}
	a, err := f.findAlloc("copyToDevice", dev, dst, int64(len(src)))
	if err != nil {
		return err
	}
	copy(a.mem[dst-a.base:], src)
	return nil
}

func (f *fakeDriver) pageable(n int64) ([]byte, error) {
	err := f.begin("pageable", anyDevice)
	defer f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	lo, _ := span(b)
	f.pageables[lo] = len(b)
	return b, nil
}

func (f *fakeDriver) freePageable(b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["freePageable"]++
	lo, _ := span(b)
	if _, ok := f.pageables[lo]; !ok {
		f.misuse("freePageable of %d bytes pageable did not return (or already freed)", len(b))
		return
	}
	delete(f.pageables, lo)
}

// span returns the address range of b's bytes. Go's heap does not move,
// so addresses identify the buffers the fake handed out.
func span(b []byte) (lo, hi uintptr) {
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return lo, lo + uintptr(len(b))
}

var _ driver = (*fakeDriver)(nil)
