//go:build cuda && cgo && linux

package gpu

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cuda_shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// cudaDriver is the driver interface over the real CUDA driver API, loaded
// with dlopen so that building needs no CUDA toolkit and a binary without a
// GPU still starts.
//
// Threading: the driver binds a CUDA context per OS thread, and Go moves
// goroutines between threads at will. Rather than locking goroutines to
// threads or funnelling every call through one locked worker, each shim
// function that needs a context takes it and calls cuCtxSetCurrent itself,
// in the same C call as the operation. A cgo call runs from start to end
// on one OS thread, so the binding and its use can never be split across
// threads, any goroutine may call any method, and blocking waits
// (cuEventSynchronize) in several goroutines proceed in parallel. The cost
// is one cuCtxSetCurrent per call, a thread-local store in the driver.
type cudaDriver struct {
	d     *C.hp_driver
	n     int
	sysfs string // where identify reads NUMA nodes

	mu sync.RWMutex
	// Guarded by mu: attached devices, indexed by ordinal.
	devs []*cudaDevice
	// rdma: the device's VMM allocations are made GPUDirect RDMA capable
	// (identify found the attribute). Guarded by mu.
	rdma []bool
}

// cudaDevice holds one attached device's C handles.
type cudaDevice struct {
	ctx     C.CUcontext
	streams []C.CUstream
	events  []C.CUevent
	// registered are the NUMA-placed pinned buffers made in this context:
	// memory this driver mapped itself (hp_host_register), so it must
	// unmap it itself, even after a reset took the registration. Guarded
	// by cudaDriver.mu.
	registered map[unsafe.Pointer]C.size_t
}

// openDriver loads the driver library at path and initialises CUDA.
func openDriver(path, sysfs string) (driver, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	var res C.hp_res
	d := C.hp_open(cpath, &msg[0], C.int(len(msg)), &res)
	if d == nil {
		if res.code != 0 {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, driverError(nil, res))
		}
		return nil, fmt.Errorf("%w: loading %s: %s", ErrUnavailable, path, C.GoString(&msg[0]))
	}
	drv := &cudaDriver{d: d, sysfs: sysfs}
	var n C.int
	if err := drv.check(C.hp_device_count(d, &n)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	drv.n = int(n)
	drv.devs = make([]*cudaDevice, drv.n)
	drv.rdma = make([]bool, drv.n)
	return drv, nil
}

// driverError converts a failed hp_res; d may be nil when the driver could
// not be initialised, and then the code has no name.
func driverError(d *C.hp_driver, r C.hp_res) error {
	e := &DriverError{Call: C.GoString(C.hp_call_name(r.call)), Code: int(r.code)}
	if d != nil {
		if s := C.hp_error_name(d, r.code); s != nil {
			e.Name = C.GoString(s)
		}
	}
	if e.Name == "" {
		e.Name = fmt.Sprintf("CUresult(%d)", e.Code)
	}
	return e
}

func (c *cudaDriver) check(r C.hp_res) error {
	if r.code == 0 {
		return nil
	}
	return driverError(c.d, r)
}

// dev returns an attached device's handles.
func (c *cudaDriver) dev(i int) (*cudaDevice, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if i < 0 || i >= len(c.devs) || c.devs[i] == nil {
		return nil, fmt.Errorf("gpu: device %d is not attached", i)
	}
	return c.devs[i], nil
}

func (c *cudaDriver) deviceCount() int { return c.n }

func (c *cudaDriver) deviceName(dev int) (string, error) {
	var name [256]C.char
	if err := c.check(C.hp_device_name(c.d, C.int(dev), &name[0], C.int(len(name)))); err != nil {
		return "", err
	}
	return C.GoString(&name[0]), nil
}

func (c *cudaDriver) deviceTotal(dev int) (int64, error) {
	var n C.size_t
	if err := c.check(C.hp_device_total(c.d, C.int(dev), &n)); err != nil {
		return 0, err
	}
	return int64(n), nil
}

func (c *cudaDriver) identify(dev int) (deviceID, error) {
	id := deviceID{numaNode: -1}
	var uuid [16]C.uchar
	var ok, vmm, rdma C.int
	if err := c.check(C.hp_device_uuid(c.d, C.int(dev), &uuid[0], &ok)); err != nil {
		return id, err
	}
	if ok != 0 {
		var b [16]byte
		for i := range b {
			b[i] = byte(uuid[i])
		}
		id.uuid = FormatUUID(b)
	}
	var pci [32]C.char
	if err := c.check(C.hp_device_pci(c.d, C.int(dev), &pci[0], C.int(len(pci)))); err != nil {
		return id, err
	}
	if p, ok := NormalizePCIBusID(C.GoString(&pci[0])); ok {
		id.pciBusID = p
		id.numaNode = sysfsNUMANode(c.sysfs, p)
	}
	if err := c.check(C.hp_device_vmm(c.d, C.int(dev), &vmm, &rdma)); err != nil {
		return id, err
	}
	id.vmm, id.rdma = vmm != 0, rdma != 0
	c.mu.Lock()
	c.rdma[dev] = id.rdma
	c.mu.Unlock()
	return id, nil
}

func (c *cudaDriver) attach(dev, streams, events int) error {
	cd := &cudaDevice{registered: map[unsafe.Pointer]C.size_t{}}
	if err := c.check(C.hp_ctx_retain(c.d, C.int(dev), &cd.ctx)); err != nil {
		return err
	}
	for range streams {
		var s C.CUstream
		if err := c.check(C.hp_stream_create(c.d, cd.ctx, &s)); err != nil {
			c.teardown(dev, cd)
			return err
		}
		cd.streams = append(cd.streams, s)
	}
	for range events {
		var e C.CUevent
		if err := c.check(C.hp_event_create(c.d, cd.ctx, &e)); err != nil {
			c.teardown(dev, cd)
			return err
		}
		cd.events = append(cd.events, e)
	}
	c.mu.Lock()
	c.devs[dev] = cd
	c.mu.Unlock()
	return nil
}

// teardown destroys what attach created, reporting the first failure.
func (c *cudaDriver) teardown(dev int, cd *cudaDevice) error {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, e := range cd.events {
		keep(c.check(C.hp_event_destroy(c.d, cd.ctx, e)))
	}
	for _, s := range cd.streams {
		keep(c.check(C.hp_stream_destroy(c.d, cd.ctx, s)))
	}
	keep(c.check(C.hp_ctx_release(c.d, C.int(dev))))
	return first
}

func (c *cudaDriver) detach(dev int) error {
	cd, err := c.dev(dev)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.devs[dev] = nil
	c.mu.Unlock()
	return c.teardown(dev, cd)
}

// reset destroys the device's context: its streams, events, allocations
// and registrations go with it, so only the memory this driver mapped for
// registered buffers is left to unmap.
func (c *cudaDriver) reset(dev int) error {
	cd, err := c.dev(dev)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.devs[dev] = nil
	c.mu.Unlock()
	err = c.check(C.hp_ctx_reset(c.d, C.int(dev)))
	for p, n := range cd.registered {
		C.hp_host_unmap(p, n)
	}
	return err
}

func (c *cudaDriver) memInfo(dev int) (int64, int64, error) {
	cd, err := c.dev(dev)
	if err != nil {
		return 0, 0, err
	}
	var free, total C.size_t
	if err := c.check(C.hp_mem_info(c.d, cd.ctx, &free, &total)); err != nil {
		return 0, 0, err
	}
	return int64(free), int64(total), nil
}

func (c *cudaDriver) alloc(dev int, n int64) (uint64, error) {
	cd, err := c.dev(dev)
	if err != nil {
		return 0, err
	}
	var p C.CUdeviceptr
	if err := c.check(C.hp_alloc(c.d, cd.ctx, C.size_t(n), &p)); err != nil {
		return 0, err
	}
	return uint64(p), nil
}

func (c *cudaDriver) free(dev int, p uint64) error {
	cd, err := c.dev(dev)
	if err != nil {
		return err
	}
	return c.check(C.hp_free(c.d, cd.ctx, C.CUdeviceptr(p)))
}

func (c *cudaDriver) granularity(dev int) (int64, error) {
	cd, err := c.dev(dev)
	if err != nil {
		return 0, err
	}
	var g C.size_t
	if err := c.check(C.hp_granularity(c.d, cd.ctx, C.int(dev), c.rdmaFlag(dev), &g)); err != nil {
		return 0, err
	}
	return int64(g), nil
}

func (c *cudaDriver) vmmAlloc(dev int, n int64) (vmem, error) {
	cd, err := c.dev(dev)
	if err != nil {
		return vmem{}, err
	}
	var p C.CUdeviceptr
	var h C.CUmemGenericAllocationHandle
	if err := c.check(C.hp_vmm_alloc(c.d, cd.ctx, C.int(dev), c.rdmaFlag(dev), C.size_t(n), &p, &h)); err != nil {
		return vmem{}, err
	}
	return vmem{ptr: uint64(p), handle: uint64(h), size: n}, nil
}

func (c *cudaDriver) rdmaFlag(dev int) C.int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if dev >= 0 && dev < len(c.rdma) && c.rdma[dev] {
		return 1
	}
	return 0
}

func (c *cudaDriver) vmmFree(dev int, m vmem) error {
	cd, err := c.dev(dev)
	if err != nil {
		return err
	}
	return c.check(C.hp_vmm_free(c.d, cd.ctx, C.CUdeviceptr(m.ptr), C.size_t(m.size), C.CUmemGenericAllocationHandle(m.handle)))
}

func (c *cudaDriver) exportFD(dev int, m vmem) (int, error) {
	cd, err := c.dev(dev)
	if err != nil {
		return -1, err
	}
	var fd C.int
	if err := c.check(C.hp_export_fd(c.d, cd.ctx, C.CUmemGenericAllocationHandle(m.handle), &fd)); err != nil {
		return -1, err
	}
	return int(fd), nil
}

func (c *cudaDriver) syncDevice(dev int) error {
	cd, err := c.dev(dev)
	if err != nil {
		return err
	}
	return c.check(C.hp_ctx_sync(c.d, cd.ctx))
}

func (c *cudaDriver) ipcHandle(dev int, p uint64) ([]byte, error) {
	cd, err := c.dev(dev)
	if err != nil {
		return nil, err
	}
	h := make([]byte, 64)
	if err := c.check(C.hp_ipc_handle(c.d, cd.ctx, C.CUdeviceptr(p), unsafe.Pointer(&h[0]))); err != nil {
		return nil, err
	}
	return h, nil
}

// hostAlloc returns pinned C memory as a slice. The slice points outside
// the Go heap, so it may be handed to C and to the driver's DMA engine
// freely; Go code writes into it directly. With a node, and a driver that
// can register host memory, the pages are placed on that NUMA node
// (cuMemHostAlloc places them wherever the first touch happens to run).
func (c *cudaDriver) hostAlloc(dev int, n int64, node int) ([]byte, error) {
	cd, err := c.dev(dev)
	if err != nil {
		return nil, err
	}
	var p unsafe.Pointer
	if node >= 0 && C.hp_has_register(c.d) != 0 {
		if err := c.check(C.hp_host_register(c.d, cd.ctx, C.size_t(n), C.int(node), &p)); err != nil {
			return nil, err
		}
		c.mu.Lock()
		cd.registered[p] = C.size_t(n)
		c.mu.Unlock()
	} else if err := c.check(C.hp_host_alloc(c.d, cd.ctx, C.size_t(n), &p)); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func (c *cudaDriver) hostFree(dev int, b []byte) error {
	cd, err := c.dev(dev)
	if err != nil {
		return err
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	c.mu.Lock()
	n, registered := cd.registered[p]
	c.mu.Unlock()
	if !registered {
		return c.check(C.hp_host_free(c.d, cd.ctx, p))
	}
	if err := c.check(C.hp_host_unregister(c.d, cd.ctx, p, n)); err != nil {
		return err
	}
	c.mu.Lock()
	delete(cd.registered, p)
	c.mu.Unlock()
	return nil
}

func (c *cudaDriver) copyAsync(dev, stream int, dst uint64, src []byte) error {
	cd, err := c.dev(dev)
	if err != nil {
		return err
	}
	return c.check(C.hp_copy_async(c.d, cd.ctx, C.CUdeviceptr(dst),
		unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src)), cd.streams[stream]))
}

func (c *cudaDriver) record(dev, event, stream int) error {
	cd, err := c.dev(dev)
	if err != nil {
		return err
	}
	return c.check(C.hp_event_record(c.d, cd.ctx, cd.events[event], cd.streams[stream]))
}

func (c *cudaDriver) wait(dev, event int) error {
	cd, err := c.dev(dev)
	if err != nil {
		return err
	}
	return c.check(C.hp_event_sync(c.d, cd.ctx, cd.events[event]))
}

func (c *cudaDriver) syncStream(dev, stream int) error {
	cd, err := c.dev(dev)
	if err != nil {
		return err
	}
	return c.check(C.hp_stream_sync(c.d, cd.ctx, cd.streams[stream]))
}

// copyToHost passes Go memory to the driver for the duration of a
// synchronous copy, which cgo's pointer rules allow ([]byte holds no Go
// pointers).
func (c *cudaDriver) copyToHost(dev int, dst []byte, src uint64) error {
	cd, err := c.dev(dev)
	if err != nil || len(dst) == 0 {
		return err
	}
	return c.check(C.hp_copy_dtoh(c.d, cd.ctx, unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst))))
}

func (c *cudaDriver) copyToDevice(dev int, dst uint64, src []byte) error {
	cd, err := c.dev(dev)
	if err != nil || len(src) == 0 {
		return err
	}
	return c.check(C.hp_copy_htod(c.d, cd.ctx, C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src))))
}

func (c *cudaDriver) pageable(n int64) ([]byte, error) {
	p := C.malloc(C.size_t(n))
	if p == nil {
		return nil, fmt.Errorf("gpu: malloc of %d bytes failed", n)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func (c *cudaDriver) freePageable(b []byte) { C.free(unsafe.Pointer(unsafe.SliceData(b))) }
