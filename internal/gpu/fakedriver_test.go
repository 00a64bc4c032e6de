package gpu

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeDriver is the driver interface in plain Go, so that the copier's
// leases, budget, pools, pipeline, handover and recovery are tested under
// go test -race without cgo or the cuda tag. The C fake (testdata/fakecuda)
// still proves the cgo boundary; this one is for logic, and fails the way
// the real driver does:
//
//   - Legacy memory (alloc) comes from a sub-allocator: requests smaller
//     than the granularity share granularity-sized blocks, and an IPC
//     handle's importer (importIPC) sees the whole block, neighbours
//     included. Freed memory is scribbled over, as reuse would, so an
//     importer still reading it sees garbage.
//   - VMM memory (vmmAlloc) is physical memory with a reference count:
//     the copier's handle, its mapping, and each consumer's import
//     (importFD, through a real file descriptor that exportFD made and
//     that may travel over a Unix socket), and each exported descriptor
//     still open, imported or not. It lives until the last goes.
//   - cuMemGetInfo reports what is left after the allocations (blocks and
//     physical memory, imported memory included), the context's own
//     overhead, and a co-located process's use (setOthers).
//   - Copies are asynchronous in the most hostile legal way: copyAsync only
//     queues, and a queued copy runs (reading its pinned source then) only
//     when something waits for it. A pageable copyToDevice returns before
//     its DMA is done; syncDevice (or the next synchronous call) finishes it.
//   - Every call is checked for misuse: calls on a device that is not
//     attached, use of freed or unknown memory, double or wild frees,
//     copies out of bounds, async copies from memory hostAlloc did not
//     return, freeing memory a queued copy still touches, reading memory a
//     queued copy still writes, VMM sizes off the granularity, detaching a
//     device that still owns memory or queued work. A misuse is recorded
//     and the call fails, but for reads under a queued copy, which on a GPU
//     are a data race rather than an error.
//   - Calls are counted per method, and failures can be injected per
//     method and device on the n-th call, for a number of calls or for
//     good. A sticky code (DriverError.Sticky: 700, 719, ECC, …) kills the
//     device's context as an asynchronous fault does: its queued work is
//     dropped and every later call on the device fails with the same code
//     until reset (or detach) destroys the context and everything in it.
//   - checkAtEnd reports misuse and leaks (device memory, pinned and
//     pageable buffers, exported file descriptors, attached devices) when
//     the test ends.
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
	allocs    map[uint64]*fakeAlloc // live device mappings by base pointer
	freed     map[uint64]int64      // unmapped ranges: base to size
	phys      map[uint64]*fakePhys  // live VMM physical memory by handle
	hosts     map[uintptr]*fakeHost // live pinned buffers by address
	pageables map[uintptr]int       // live pageable buffers by address
	fds       []fakeFD              // exports exportFD made
	nextID    uint64
	misuses   []string
}

// fakeConfig sizes the fake's devices. Zero fields take the defaults.
type fakeConfig struct {
	devices     int   // default 1
	total       int64 // bytes per device; default 1 GiB
	granularity int64 // allocation granularity; default 64 KiB (the real 2 MiB makes tests slow, not different)
	ctxOverhead int64 // device memory an attached context takes; default 0
	noVMM       bool  // the driver has no VMM API: Handover falls back to IPC
	rdma        bool  // VMM allocations are GPUDirect RDMA capable
	numa        []int // host NUMA node per device; default -1 for all
}

// fakeFault makes calls of one method fail. The zero dev is device 0; use
// anyDevice to match every call, including those that name no device. A
// sticky code kills the device's context with the first failure.
type fakeFault struct {
	method string // driver method, e.g. "alloc"
	dev    int
	after  int // matching calls that succeed first: the fault hits call after+1
	times  int // matching calls that fail then; 0 means 1, -1 means all later ones
	code   int // CUresult, e.g. cudaErrorIllegalAddress
}

const anyDevice = -1

type fakeDevice struct {
	attached bool
	dead     int   // CUresult of the sticky fault that killed the context; 0 while healthy
	others   int64 // device memory another process holds
	next     uint64
	block    *fakeBlock    // the legacy allocator's block small allocations go into
	streams  [][]*fakeCopy // queued copies per stream, in order
	events   []fakeEvent
	seq      uint64    // numbers queued copies in issue order
	dma      *fakeCopy // a pageable copy's DMA still running after copyToDevice returned
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
	src  []byte    // pinned memory, read when the copy runs
	host *fakeHost // nil for a pageable copy's DMA (src is the driver's staging copy)
}

type fakeHost struct {
	dev    int // device whose context allocated it
	node   int // NUMA node it was asked for
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
		cfg.granularity = 64 << 10
	}
	f := &fakeDriver{
		cfg:       cfg,
		calls:     make(map[string]int),
		hooks:     make(map[string]func(int)),
		allocs:    make(map[uint64]*fakeAlloc),
		freed:     make(map[uint64]int64),
		phys:      make(map[uint64]*fakePhys),
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
	if c, ok := map[string]string{
		"deviceName": "cuDeviceGetName", "deviceTotal": "cuDeviceTotalMem_v2", "identify": "cuDeviceGetUuid_v2",
		"attach": "cuDevicePrimaryCtxRetain", "detach": "cuDevicePrimaryCtxRelease_v2", "reset": "cuDevicePrimaryCtxReset_v2",
		"memInfo": "cuMemGetInfo_v2", "granularity": "cuMemGetAllocationGranularity",
		"alloc": "cuMemAlloc_v2", "free": "cuMemFree_v2", "ipcHandle": "cuIpcGetMemHandle",
		"vmmAlloc": "cuMemCreate", "vmmFree": "cuMemRelease", "exportFD": "cuMemExportToShareableHandle",
		"hostAlloc": "cuMemHostAlloc", "hostFree": "cuMemFreeHost", "copyAsync": "cuMemcpyHtoDAsync_v2",
		"record": "cuEventRecord", "wait": "cuEventSynchronize", "syncStream": "cuStreamSynchronize",
		"syncDevice": "cuCtxSynchronize", "copyToHost": "cuMemcpyDtoH_v2", "copyToDevice": "cuMemcpyHtoD_v2",
		"pageable": "malloc", "freePageable": "free",
	}[method]; ok {
		return c
	}
	panic("fake driver: no method " + method)
}

// fakeError is the error a method returns with code, named the way
// cuGetErrorName names it.
func fakeError(method string, code int) error {
	name, ok := map[int]string{
		cudaErrorInvalidValue: "CUDA_ERROR_INVALID_VALUE", cudaErrorOutOfMemory: cudaErrorOutOfMemoryName,
		cudaErrorInvalidDevice: "CUDA_ERROR_INVALID_DEVICE", cudaErrorInvalidContext: "CUDA_ERROR_INVALID_CONTEXT",
		cudaErrorInvalidHandle: "CUDA_ERROR_INVALID_HANDLE", cudaErrorIllegalAddress: "CUDA_ERROR_ILLEGAL_ADDRESS",
		cudaErrorLaunchFailed: "CUDA_ERROR_LAUNCH_FAILED", cudaErrorECCUncorrectable: "CUDA_ERROR_ECC_UNCORRECTABLE",
		cudaErrorNotSupported: "CUDA_ERROR_NOT_SUPPORTED", cudaErrorUnknown: "CUDA_ERROR_UNKNOWN",
	}[code]
	if !ok {
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

// setOthers makes another process hold n bytes of dev's memory.
func (f *fakeDriver) setOthers(dev int, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.devs[dev].others = n
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
	allocs, phys, pinned, pageable, attached, queued int
}

func (f *fakeDriver) live() fakeLive {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reap()
	l := fakeLive{allocs: len(f.allocs), phys: len(f.phys), pinned: len(f.hosts), pageable: len(f.pageables)}
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

// leaks describes everything still allocated, attached or open. Physical
// memory a consumer's import holds is the consumer's, not a leak; the
// consumer (the test) closes its imports.
func (f *fakeDriver) leaks() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reap()
	var out []string
	for _, a := range f.allocs {
		out = append(out, fmt.Sprintf("device %d: %d bytes mapped at %#x", a.dev, a.n, a.base))
	}
	for _, p := range f.phys {
		if p.handle || p.imports > 0 {
			out = append(out, fmt.Sprintf("device %d: %d bytes of physical memory (handle %v, %d imports)", p.dev, p.size, p.handle, p.imports))
		}
	}
	for _, h := range f.hosts {
		out = append(out, fmt.Sprintf("pinned buffer of %d bytes (device %d's context)", len(h.mem), h.dev))
	}
	for _, n := range f.pageables {
		out = append(out, fmt.Sprintf("pageable buffer of %d bytes", n))
	}
	for _, fd := range f.fds {
		if fd.open() {
			out = append(out, fmt.Sprintf("exported file descriptor (export %d of %d bytes) still open", fd.b, fd.p.size))
		}
	}
	for i, d := range f.devs {
		if d.attached {
			out = append(out, fmt.Sprintf("device %d still attached", i))
		}
	}
	slices.Sort(out)
	return out
}

// ---- call plumbing ----

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
	f.reap()
	if dev >= 0 && dev < len(f.devs) && f.devs[dev].dead != 0 && method != "detach" && method != "reset" {
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
		err := fakeError(method, ft.code)
		if de := err.(*DriverError); de.Sticky() && dev >= 0 && dev < len(f.devs) {
			f.kill(dev, ft.code)
		}
		return err
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
	if d.dma != nil {
		d.dma.dst.queued--
		d.dma = nil
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

// exists checks a device ordinal for the calls that need no context.
func (f *fakeDriver) exists(method string, dev int) error {
	if dev < 0 || dev >= len(f.devs) {
		f.misuse("%s of device %d, which does not exist", method, dev)
		return fakeError(method, cudaErrorInvalidDevice)
	}
	return nil
}

// ---- devices and contexts ----

func (f *fakeDriver) deviceCount() int { return len(f.devs) }

func (f *fakeDriver) deviceName(dev int) (string, error) {
	err := f.begin("deviceName", dev)
	defer f.mu.Unlock()
	if err == nil {
		err = f.exists("deviceName", dev)
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Go Fake Device %d", dev), nil
}

func (f *fakeDriver) deviceTotal(dev int) (int64, error) {
	err := f.begin("deviceTotal", dev)
	defer f.mu.Unlock()
	if err == nil {
		err = f.exists("deviceTotal", dev)
	}
	if err != nil {
		return 0, err
	}
	return f.cfg.total, nil
}

// fakeUUID and fakePCI are device dev's names across processes.
func fakeUUID(dev int) string {
	return FormatUUID([16]byte{0xfa, 0xce, byte(dev), 0x01, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, byte(dev)})
}

func fakePCI(dev int) string { return fmt.Sprintf("0000:%02x:00.0", 0x18+dev*0x10) }

func (f *fakeDriver) identify(dev int) (deviceID, error) {
	err := f.begin("identify", dev)
	defer f.mu.Unlock()
	if err == nil {
		err = f.exists("identify", dev)
	}
	if err != nil {
		return deviceID{}, err
	}
	node := -1
	if dev < len(f.cfg.numa) {
		node = f.cfg.numa[dev]
	}
	return deviceID{uuid: fakeUUID(dev), pciBusID: fakePCI(dev), numaNode: node, vmm: !f.cfg.noVMM, rdma: f.cfg.rdma && !f.cfg.noVMM}, nil
}

func (f *fakeDriver) attach(dev, streams, events int) error {
	err := f.begin("attach", dev)
	defer f.mu.Unlock()
	if err == nil {
		err = f.exists("attach", dev)
	}
	if err != nil {
		return err
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
		if owned := f.owned(dev); len(owned) > 0 {
			f.misuse("detach of device %d with %s", dev, strings.Join(owned, ", "))
			return fakeError("detach", cudaErrorInvalidContext)
		}
	}
	f.destroy(dev)
	return nil
}

// reset destroys the device's context whatever it holds, as
// cuDevicePrimaryCtxReset does, and drops the copier's reference.
func (f *fakeDriver) reset(dev int) error {
	err := f.begin("reset", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := f.device("reset", dev); err != nil {
		return err
	}
	f.destroy(dev)
	return nil
}

// owned lists what a healthy context still holds.
func (f *fakeDriver) owned(dev int) []string {
	var owned []string
	for _, a := range f.allocs {
		if a.dev == dev {
			owned = append(owned, fmt.Sprintf("%d bytes still mapped at %#x", a.n, a.base))
		}
	}
	for _, p := range f.phys {
		if p.dev == dev && p.handle {
			owned = append(owned, fmt.Sprintf("a VMM handle of %d bytes", p.size))
		}
	}
	for _, h := range f.hosts {
		if h.dev == dev {
			owned = append(owned, fmt.Sprintf("a pinned buffer of %d bytes made in its context", len(h.mem)))
		}
	}
	for s, q := range f.devs[dev].streams {
		if len(q) > 0 {
			owned = append(owned, fmt.Sprintf("%d copies queued on stream %d", len(q), s))
		}
	}
	slices.Sort(owned)
	return owned
}

// destroy ends dev's context: its mappings, legacy memory, VMM handles,
// pinned buffers and queued work are gone. Physical memory a consumer
// imported survives: the import is its own reference.
func (f *fakeDriver) destroy(dev int) {
	for _, a := range f.allocs {
		if a.dev == dev {
			f.unmap(a)
		}
	}
	for _, p := range f.phys {
		if p.dev == dev && p.handle {
			p.handle = false
			f.unref(p)
		}
	}
	for p, h := range f.hosts {
		if h.dev == dev {
			delete(f.hosts, p)
		}
	}
	d := f.devs[dev]
	*d = fakeDevice{next: d.next, others: d.others} // pointers stay unique across contexts
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
	return max(0, f.cfg.total-f.used(dev)-f.cfg.ctxOverhead-d.others), f.cfg.total, nil
}

// used is the device memory dev's allocations take: legacy blocks and
// physical memory, whoever holds it.
func (f *fakeDriver) used(dev int) int64 {
	var n int64
	seen := map[*fakeBlock]bool{}
	for _, a := range f.allocs {
		if a.dev == dev && a.block != nil && !seen[a.block] {
			seen[a.block] = true
			n += int64(len(a.block.mem))
		}
	}
	for _, p := range f.phys {
		if p.dev == dev {
			n += p.size
		}
	}
	return n
}

func (f *fakeDriver) granularity(dev int) (int64, error) {
	err := f.begin("granularity", dev)
	defer f.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if _, err := f.device("granularity", dev); err != nil {
		return 0, err
	}
	return f.cfg.granularity, nil
}

var _ driver = (*fakeDriver)(nil)
