package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Device memory in the Go fake driver: the legacy sub-allocator, VMM
// physical memory, and the consumer's side of both handovers.

// fakeBlock is one block of the legacy allocator. Allocations smaller
// than the granularity share a block, as cuMemAlloc's do; an IPC handle
// maps the block it is in, so its importer reaches every neighbour.
type fakeBlock struct {
	base uint64
	mem  []byte
	used int64 // bytes handed out from the start; the rest is free
}

// fakeAlloc is a mapped device address range: a legacy allocation (in a
// block) or a VMM mapping (of a fakePhys).
type fakeAlloc struct {
	dev    int
	base   uint64
	n      int64  // requested (legacy) or mapped (VMM) size; copies past it are misuse
	mem    []byte // the bytes behind [base, base+n)
	block  *fakeBlock
	off    int64 // offset in block
	phys   *fakePhys
	id     uint64
	queued int // copies into it not yet run
}

// fakePhys is VMM physical memory. It lives while any reference does: the
// creating context's handle, its mapping, a consumer's import, or an
// exported descriptor still open (the driver documents that one never
// imported keeps the allocation alive after cuMemRelease).
type fakePhys struct {
	dev     int
	id      uint64
	size    int64
	mem     []byte
	handle  bool // the copier's handle is not yet released
	mapped  int  // live mappings
	imports int  // consumers' imports
	// file is a memfd ("GOFAKEVM", id) that each export opens anew; an
	// export holds an OFD lock on a byte of its own until every copy of
	// its descriptor, wherever it travelled, is closed. -1 until exported.
	file    int
	exports int // lock bytes handed out
}

// Lock bytes of a fakePhys's file: one per export from here.
const fakeExportLocks = 1024

// lockHeld reports whether an open description other than fd's holds a
// lock in [start, start+n) of fd's file (an error counts as held).
func lockHeld(fd int, start, n int64) bool {
	l := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: start, Len: n}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &l); err != nil {
		return true
	}
	return l.Type != unix.F_UNLCK
}

// exportOpen reports whether p has an exported descriptor open anywhere.
func (p *fakePhys) exportOpen() bool {
	return p.file >= 0 && p.exports > 0 && lockHeld(p.file, fakeExportLocks, int64(p.exports))
}

// reap frees memory whose last reference was an exported descriptor that
// has been closed since: the fake is not told of a close, so every call
// looks. Called with f.mu held.
func (f *fakeDriver) reap() {
	for _, p := range f.phys {
		f.unref(p)
	}
}

// garbage is what freed device memory holds by the time someone reads it:
// another allocation's bytes, as far as a consumer can tell.
const garbage = 0xDE

func scribble(b []byte) {
	for i := range b {
		b[i] = garbage
	}
}

func (f *fakeDriver) newID() uint64 {
	f.nextID++
	return f.nextID
}

// findAlloc finds the live mapping holding [p, p+n) on dev, or records the
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

// unmap removes a mapping; legacy memory is scribbled, as reuse would.
func (f *fakeDriver) unmap(a *fakeAlloc) {
	delete(f.allocs, a.base)
	f.freed[a.base] = a.n
	if a.phys != nil {
		a.phys.mapped--
		f.unref(a.phys)
		return
	}
	scribble(a.mem)
}

// unref destroys physical memory nothing refers to any more.
func (f *fakeDriver) unref(p *fakePhys) {
	if p.handle || p.mapped > 0 || p.imports > 0 || p.exportOpen() {
		return
	}
	scribble(p.mem)
	if p.file >= 0 {
		unix.Close(p.file)
		p.file = -1
	}
	delete(f.phys, p.id)
}

// ---- legacy: cuMemAlloc, cuMemFree, cuIpcGetMemHandle ----

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
	g := f.cfg.granularity
	b := d.block
	off := int64(0)
	if b != nil {
		off = alignUp(b.used, 512)
	}
	if n >= g || b == nil || off+n > int64(len(b.mem)) {
		size := roundUp(n, g)
		if size > f.cfg.total-f.used(dev)-f.cfg.ctxOverhead-d.others {
			return 0, fakeError("alloc", cudaErrorOutOfMemory)
		}
		b = &fakeBlock{base: d.next, mem: make([]byte, size)}
		for i := range b.mem {
			b.mem[i] = 0xA5 // device memory starts as garbage
		}
		d.next += uint64(size)
		off = 0
		if n < g {
			d.block = b // later small allocations share it
		}
	}
	b.used = off + n
	a := &fakeAlloc{dev: dev, base: b.base + uint64(off), n: n, mem: b.mem[off : off+n], block: b, off: off, id: f.newID()}
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
	case a == nil || a.phys != nil:
		f.misuse("free of device memory at %#x that cuMemAlloc did not return", p)
		return fakeError("free", cudaErrorInvalidValue)
	case a.dev != dev:
		f.misuse("free of device %d memory through device %d", a.dev, dev)
		return fakeError("free", cudaErrorInvalidContext)
	}
	f.finishDMA(d) // cuMemFree waits for the device, as cudaFree does
	if a.queued > 0 {
		f.misuse("free of device memory at %#x with %d copies into it still queued", p, a.queued)
		return fakeError("free", cudaErrorInvalidValue)
	}
	f.unmap(a)
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
	if a.base != p || a.phys != nil {
		f.misuse("ipcHandle of %#x, which is not the base of a cuMemAlloc allocation", p)
		return nil, fakeError("ipcHandle", cudaErrorInvalidValue)
	}
	h := make([]byte, 64)
	copy(h, "GOFAKEIP")
	binary.LittleEndian.PutUint64(h[8:], a.id)
	return h, nil
}

// ---- VMM: cuMemCreate+Map+SetAccess, Unmap+Release, Export ----

func (f *fakeDriver) vmmAlloc(dev int, n int64) (vmem, error) {
	err := f.begin("vmmAlloc", dev)
	defer f.mu.Unlock()
	if err != nil {
		return vmem{}, err
	}
	d, err := f.device("vmmAlloc", dev)
	if err != nil {
		return vmem{}, err
	}
	switch {
	case f.cfg.noVMM:
		f.misuse("vmmAlloc on a driver without VMM")
		return vmem{}, fakeError("vmmAlloc", cudaErrorNotSupported)
	case n <= 0 || n%f.cfg.granularity != 0:
		f.misuse("vmmAlloc of %d bytes, not a positive multiple of the granularity %d", n, f.cfg.granularity)
		return vmem{}, fakeError("vmmAlloc", cudaErrorInvalidValue)
	case n > f.cfg.total-f.used(dev)-f.cfg.ctxOverhead-d.others:
		return vmem{}, fakeError("vmmAlloc", cudaErrorOutOfMemory)
	}
	p := &fakePhys{dev: dev, id: f.newID(), size: n, mem: make([]byte, n), handle: true, mapped: 1, file: -1}
	for i := range p.mem {
		p.mem[i] = 0xA5
	}
	f.phys[p.id] = p
	a := &fakeAlloc{dev: dev, base: d.next, n: n, mem: p.mem, phys: p, id: f.newID()}
	d.next += uint64(n)
	f.allocs[a.base] = a
	return vmem{ptr: a.base, handle: p.id, size: n}, nil
}

func (f *fakeDriver) vmmFree(dev int, m vmem) error {
	err := f.begin("vmmFree", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := f.device("vmmFree", dev); err != nil {
		return err
	}
	a, p := f.allocs[m.ptr], f.phys[m.handle]
	switch {
	case a == nil || p == nil || a.phys != p || !p.handle || a.n != m.size:
		f.misuse("vmmFree of %+v, which is not a live VMM allocation (double free?)", m)
		return fakeError("vmmFree", cudaErrorInvalidValue)
	case a.queued > 0:
		f.misuse("vmmFree of %#x with %d copies into it still queued", m.ptr, a.queued)
		return fakeError("vmmFree", cudaErrorInvalidValue)
	}
	f.unmap(a)
	p.handle = false
	f.unref(p)
	return nil
}

// fakeFD is an export: lock byte b of p's file, held by the exported
// descriptor's own open file description (over a Unix socket it arrives
// as another number for the same description, which keeps the lock).
type fakeFD struct {
	p *fakePhys
	b int
}

// open reports whether the export's descriptor is still open anywhere.
func (x fakeFD) open() bool {
	return x.p.file >= 0 && lockHeld(x.p.file, fakeExportLocks+int64(x.b), 1)
}

func (f *fakeDriver) exportFD(dev int, m vmem) (int, error) {
	err := f.begin("exportFD", dev)
	defer f.mu.Unlock()
	if err != nil {
		return -1, err
	}
	if _, err := f.device("exportFD", dev); err != nil {
		return -1, err
	}
	p := f.phys[m.handle]
	if p == nil || !p.handle {
		f.misuse("exportFD of handle %d, which is not live", m.handle)
		return -1, fakeError("exportFD", cudaErrorInvalidValue)
	}
	if p.file < 0 {
		fd, err := unix.MemfdCreate("gofakecuda-vmm", unix.MFD_CLOEXEC)
		if err != nil {
			return -1, fakeError("exportFD", cudaErrorUnknown)
		}
		var b [16]byte
		copy(b[:], "GOFAKEVM")
		binary.LittleEndian.PutUint64(b[8:], p.id)
		if _, err := unix.Pwrite(fd, b[:], 0); err != nil {
			unix.Close(fd)
			return -1, fakeError("exportFD", cudaErrorUnknown)
		}
		p.file = fd
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", p.file), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fakeError("exportFD", cudaErrorUnknown)
	}
	l := unix.Flock_t{Type: unix.F_WRLCK, Start: fakeExportLocks + int64(p.exports), Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &l); err != nil {
		unix.Close(fd)
		return -1, fakeError("exportFD", cudaErrorUnknown)
	}
	f.fds = append(f.fds, fakeFD{p: p, b: p.exports})
	p.exports++
	return fd, nil
}

// ---- the consumer's side ----

// fakeImport is a consumer's mapping of staged memory.
type fakeImport struct {
	f     *fakeDriver
	phys  *fakePhys // importFD: a reference of its own
	block *fakeBlock
	off   int64 // importIPC: where the allocation starts in its block
	size  int64 // readable from the import's base
}

// importFD imports memory from a file descriptor exportFD made, as
// cuMemImportFromShareableHandle does, taking a reference of its own. The
// caller still owns (and closes) file.
func (f *fakeDriver) importFD(file *os.File) (*fakeImport, error) {
	var b [16]byte
	if _, err := file.ReadAt(b[:], 0); err != nil || string(b[:8]) != "GOFAKEVM" {
		return nil, fmt.Errorf("not a file descriptor the fake exported: %v", err)
	}
	id := binary.LittleEndian.Uint64(b[8:])
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reap()
	p := f.phys[id]
	if p == nil {
		// Cannot happen while file is open: its export holds the memory.
		return nil, errors.New("the exported memory is gone")
	}
	p.imports++
	return &fakeImport{f: f, phys: p, size: p.size}, nil
}

// importIPC opens a legacy IPC handle, as cuIpcOpenMemHandle does: it
// maps the allocation's whole block and takes no reference, so what it
// reads after the exporter frees the memory is whatever is there then.
func (f *fakeDriver) importIPC(handle []byte) (*fakeImport, error) {
	if len(handle) != 64 || string(handle[:8]) != "GOFAKEIP" {
		return nil, errors.New("not a fake IPC handle")
	}
	id := binary.LittleEndian.Uint64(handle[8:])
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.allocs {
		if a.id == id && a.block != nil {
			return &fakeImport{f: f, block: a.block, off: a.off, size: int64(len(a.block.mem)) - a.off}, nil
		}
	}
	return nil, errors.New("IPC handle names no live allocation")
}

// read copies len(p) bytes at off from the import's base.
func (m *fakeImport) read(off int64, p []byte) error {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	if off < 0 || off > m.size || int64(len(p)) > m.size-off {
		return fmt.Errorf("read of %d bytes at %d outside the %d mapped", len(p), off, m.size)
	}
	if m.phys != nil {
		copy(p, m.phys.mem[off:])
	} else {
		copy(p, m.block.mem[m.off+off:])
	}
	return nil
}

// close releases the import; an FD import drops its reference.
func (m *fakeImport) close() {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	if m.phys != nil {
		m.phys.imports--
		m.f.unref(m.phys)
		m.phys = nil
	}
}
