//go:build cuda && cgo && linux

package gpu

/*
#include "cuda_shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// VMMProbe is the driver's VMM API on one device, both sides of a
// descriptor handover, for `hubproxy gpu vmmcheck`: it checks on a real
// node what staging's VMM path relies on (an importer's memory outlives
// whatever its exporter does) with the same shim the Copier uses. It is
// not for staging: it has no budget, no pool and no lease.
type VMMProbe struct {
	d   *C.hp_driver
	ctx C.CUcontext
	dev int
}

// VMMAlloc is one mapped VMM allocation: made here or imported.
type VMMAlloc struct {
	ptr  C.CUdeviceptr
	h    C.CUmemGenericAllocationHandle
	Size int64
}

// OpenVMMProbe loads the driver at path and retains device dev's primary
// context.
func OpenVMMProbe(path string, dev int) (*VMMProbe, error) {
	drv, err := openDriver(path, "")
	if err != nil {
		return nil, err
	}
	cd := drv.(*cudaDriver)
	if dev < 0 || dev >= cd.n {
		return nil, fmt.Errorf("gpu: no device %d (%d found)", dev, cd.n)
	}
	p := &VMMProbe{d: cd.d, dev: dev}
	if err := p.check(C.hp_ctx_retain(p.d, C.int(dev), &p.ctx)); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *VMMProbe) check(r C.hp_res) error {
	if r.code == 0 {
		return nil
	}
	return driverError(p.d, r)
}

// Close drops the context reference OpenVMMProbe (or Reset) took. The
// library stays loaded: libcuda does not support unloading.
func (p *VMMProbe) Close() error {
	return p.check(C.hp_ctx_release(p.d, C.int(p.dev)))
}

// Granularity is the driver's minimum and recommended granularity for a
// POSIX-descriptor-exportable allocation on the device.
func (p *VMMProbe) Granularity() (minimum, recommended int64, err error) {
	var g C.size_t
	if err := p.check(C.hp_granularity_of(p.d, p.ctx, C.int(p.dev), C.HP_GRANULARITY_MINIMUM, &g)); err != nil {
		return 0, 0, err
	}
	minimum = int64(g)
	if err := p.check(C.hp_granularity_of(p.d, p.ctx, C.int(p.dev), C.HP_GRANULARITY_RECOMMENDED, &g)); err != nil {
		return 0, 0, err
	}
	return minimum, int64(g), nil
}

// MemFree is cuMemGetInfo's free bytes: device-wide on a real GPU.
func (p *VMMProbe) MemFree() (int64, error) {
	var free, total C.size_t
	if err := p.check(C.hp_mem_info(p.d, p.ctx, &free, &total)); err != nil {
		return 0, err
	}
	return int64(free), nil
}

// Create makes, maps and grants access to n bytes (a multiple of the
// minimum granularity) exportable as a POSIX descriptor.
func (p *VMMProbe) Create(n int64) (*VMMAlloc, error) {
	a := &VMMAlloc{Size: n}
	if err := p.check(C.hp_vmm_alloc(p.d, p.ctx, C.int(p.dev), 0, C.size_t(n), &a.ptr, &a.h)); err != nil {
		return nil, err
	}
	return a, nil
}

// Export returns a new descriptor for a's memory; the caller closes it.
func (p *VMMProbe) Export(a *VMMAlloc) (int, error) {
	var fd C.int
	if err := p.check(C.hp_export_fd(p.d, p.ctx, a.h, &fd)); err != nil {
		return -1, err
	}
	return int(fd), nil
}

// Import maps the n bytes behind an exported descriptor; fd stays the
// caller's to close, the import being a reference of its own.
func (p *VMMProbe) Import(fd int, n int64) (*VMMAlloc, error) {
	a := &VMMAlloc{Size: n}
	if err := p.check(C.hp_vmm_import(p.d, p.ctx, C.int(p.dev), C.int(fd), C.size_t(n), &a.ptr, &a.h)); err != nil {
		return nil, err
	}
	return a, nil
}

// Free unmaps a and releases its handle.
func (p *VMMProbe) Free(a *VMMAlloc) error {
	return p.check(C.hp_vmm_free(p.d, p.ctx, a.ptr, C.size_t(a.Size), a.h))
}

// Write copies b to the start of a (synchronously).
func (p *VMMProbe) Write(a *VMMAlloc, b []byte) error {
	if int64(len(b)) > a.Size {
		return fmt.Errorf("gpu: %d bytes into a %d-byte allocation", len(b), a.Size)
	}
	if len(b) == 0 {
		return nil
	}
	return p.check(C.hp_copy_htod(p.d, p.ctx, a.ptr, unsafe.Pointer(&b[0]), C.size_t(len(b))))
}

// Read copies the start of a into b (synchronously).
func (p *VMMProbe) Read(a *VMMAlloc, b []byte) error {
	if int64(len(b)) > a.Size {
		return fmt.Errorf("gpu: %d bytes from a %d-byte allocation", len(b), a.Size)
	}
	if len(b) == 0 {
		return nil
	}
	return p.check(C.hp_copy_dtoh(p.d, p.ctx, unsafe.Pointer(&b[0]), a.ptr, C.size_t(len(b))))
}

// Reset resets the device's primary context, destroying everything in it
// (in this process), then retains the new one.
func (p *VMMProbe) Reset() error {
	if err := p.check(C.hp_ctx_reset(p.d, C.int(p.dev))); err != nil {
		return err
	}
	return p.check(C.hp_ctx_retain(p.d, C.int(p.dev), &p.ctx))
}
