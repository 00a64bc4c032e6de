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
	d *C.hp_driver
	n int

	mu sync.RWMutex
	// Guarded by mu: attached devices, indexed by ordinal.
	devs []*cudaDevice
}

// cudaDevice holds one attached device's C handles.
type cudaDevice struct {
	ctx     C.CUcontext
	streams []C.CUstream
	events  []C.CUevent
}

// openDriver loads the driver library at path and initialises CUDA.
func openDriver(path string) (driver, error) {
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
	drv := &cudaDriver{d: d}
	var n C.int
	if err := drv.check(C.hp_device_count(d, &n)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	drv.n = int(n)
	drv.devs = make([]*cudaDevice, drv.n)
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

func (c *cudaDriver) attach(dev, streams, events int) error {
	cd := &cudaDevice{}
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
// freely; Go code writes into it directly.
func (c *cudaDriver) hostAlloc(dev int, n int64) ([]byte, error) {
	cd, err := c.dev(dev)
	if err != nil {
		return nil, err
	}
	var p unsafe.Pointer
	if err := c.check(C.hp_host_alloc(c.d, cd.ctx, C.size_t(n), &p)); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func (c *cudaDriver) hostFree(dev int, b []byte) error {
	cd, err := c.dev(dev)
	if err != nil {
		return err
	}
	return c.check(C.hp_host_free(c.d, cd.ctx, unsafe.Pointer(unsafe.SliceData(b))))
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

// fakeControl reaches the control functions of the fake driver in
// testdata/fakecuda. Only tests use it; it lives here because this is the
// one file that may import "C".
type fakeControl struct{ lib unsafe.Pointer }

// openFakeControl dlopens the fake at path. Open with the same DriverPath
// then shares its state (dlopen returns the already loaded instance).
func openFakeControl(path string) (*fakeControl, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	lib := C.hp_lib_open(cpath, &msg[0], C.int(len(msg)))
	if lib == nil {
		return nil, fmt.Errorf("loading %s: %s", path, C.GoString(&msg[0]))
	}
	return &fakeControl{lib: lib}, nil
}

func (f *fakeControl) sym(name string) unsafe.Pointer {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	p := C.hp_lib_sym(f.lib, cname)
	if p == nil {
		panic("fakecuda: missing " + name)
	}
	return p
}

// calls returns how often the entry point name was called (failures too).
func (f *fakeControl) calls(name string) int64 { return f.llS("fake_calls", name) }

// live returns the live objects of a kind: alloc, host, stream, event, ctx
// (context references), or violations (misuses the fake detected).
func (f *fakeControl) live(kind string) int64 { return f.llS("fake_live", kind) }

func (f *fakeControl) llS(fn, arg string) int64 {
	carg := C.CString(arg)
	defer C.free(unsafe.Pointer(carg))
	return int64(C.hp_fn_ll_s(f.sym(fn), carg))
}

// fail makes the entry point name return code count times (-1: forever),
// after letting after more calls succeed.
func (f *fakeControl) fail(name string, code, after, count int) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	C.hp_fn_i_siii(f.sym("fake_fail"), cname, C.int(code), C.int(after), C.int(count))
}

// configure sets the device count and per-device memory; call before Open.
func (f *fakeControl) configure(devices int, total int64) {
	C.hp_fn_i_iull(f.sym("fake_configure"), C.int(devices), C.ulonglong(total))
}

// setCopyDelay makes each queued copy take at least us microseconds, so
// that reusing a buffer before its copy completes corrupts data visibly.
func (f *fakeControl) setCopyDelay(us int) {
	C.hp_fn_i_iull(f.sym("fake_set_copy_delay"), C.int(us), 0)
}

// ipcRead reads through an IPC handle the way a consumer process would.
func (f *fakeControl) ipcRead(handle []byte, off int64, p []byte) int {
	return int(C.hp_fn_i_pullpull(f.sym("fake_ipc_read"), unsafe.Pointer(&handle[0]),
		C.ulonglong(off), unsafe.Pointer(&p[0]), C.ulonglong(len(p))))
}
