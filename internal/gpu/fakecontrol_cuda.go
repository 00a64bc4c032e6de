//go:build cuda && cgo && linux

package gpu

/*
#include <stdlib.h>
#include "cuda_shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// fakeControl reaches the control functions of the fake driver in
// testdata/fakecuda. Only tests use it; it lives outside the _test files
// because those may not import "C".
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
// after letting after more calls succeed. A sticky code kills the calling
// thread's context, as on a GPU: every later call in it fails the same way
// until cuDevicePrimaryCtxReset.
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

// importIPC opens an IPC handle as a consumer process would
// (cuIpcOpenMemHandle: the allocation's whole block, no reference) and
// returns an import slot, or a negative number.
func (f *fakeControl) importIPC(handle []byte) int {
	return int(C.hp_fn_i_pullpull(f.sym("fake_import_ipc"), unsafe.Pointer(&handle[0]), 0, nil, 0))
}

// importFD imports a file descriptor the fake exported, as a consumer
// would (cuMemImportFromShareableHandle: a reference of its own), and
// returns an import slot, or a negative number. fd stays the caller's.
func (f *fakeControl) importFD(fd int) int {
	return int(C.hp_fn_i_i(f.sym("fake_import_fd"), C.int(fd)))
}

// importRead reads len(p) bytes at off of an import: 0, or negative for
// a dead slot or a range outside what it maps.
func (f *fakeControl) importRead(slot int, off int64, p []byte) int {
	return int(C.hp_fn_i_iullpull(f.sym("fake_import_read"), C.int(slot), C.ulonglong(off),
		unsafe.Pointer(&p[0]), C.ulonglong(len(p))))
}

// importSize is how many bytes an import maps.
func (f *fakeControl) importSize(slot int) int64 {
	return int64(C.hp_fn_i_i(f.sym("fake_import_size"), C.int(slot)))
}

// importClose ends an import.
func (f *fakeControl) importClose(slot int) { C.hp_fn_i_i(f.sym("fake_import_close"), C.int(slot)) }

// setNoVMM makes the fake report no VMM support (call before Open).
func (f *fakeControl) setNoVMM() { C.hp_fn_i_iull(f.sym("fake_set_novmm"), 1, 0) }

// setRDMA makes the fake report GPUDirect RDMA with VMM (call before Open).
func (f *fakeControl) setRDMA() { C.hp_fn_i_iull(f.sym("fake_set_rdma"), 1, 0) }

// setOverhead makes an attached context take n bytes of device memory.
func (f *fakeControl) setOverhead(n int64) {
	C.hp_fn_i_iull(f.sym("fake_set_overhead"), 0, C.ulonglong(n))
}
