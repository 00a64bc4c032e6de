// cuda_shim.h: the slice of the CUDA driver API hubproxy uses, declared
// from the driver's documented ABI (no cuda.h is needed to build), and the
// shim that the cgo file calls. Only copier_cuda.go includes it.
#ifndef HUBPROXY_CUDA_SHIM_H
#define HUBPROXY_CUDA_SHIM_H

#include <stddef.h>

typedef int CUresult; // CUDA_SUCCESS == 0
typedef int CUdevice;
typedef unsigned long long CUdeviceptr; // CUdeviceptr_v2 on 64-bit hosts
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct { char reserved[64]; } CUipcMemHandle;

#define HP_MEMHOSTALLOC_PORTABLE 0x01 // CU_MEMHOSTALLOC_PORTABLE
#define HP_STREAM_NON_BLOCKING 0x01   // CU_STREAM_NON_BLOCKING
#define HP_EVENT_BLOCKING_SYNC 0x01   // CU_EVENT_BLOCKING_SYNC
#define HP_EVENT_DISABLE_TIMING 0x02  // CU_EVENT_DISABLE_TIMING

// hp_call names the driver entry point a shim function failed in.
enum hp_call {
	HP_cuInit,
	HP_cuDeviceGetCount,
	HP_cuDeviceGet,
	HP_cuDeviceGetName,
	HP_cuDeviceTotalMem,
	HP_cuDevicePrimaryCtxRetain,
	HP_cuDevicePrimaryCtxRelease,
	HP_cuCtxSetCurrent,
	HP_cuMemGetInfo,
	HP_cuMemAlloc,
	HP_cuMemFree,
	HP_cuMemHostAlloc,
	HP_cuMemFreeHost,
	HP_cuStreamCreate,
	HP_cuStreamDestroy,
	HP_cuStreamSynchronize,
	HP_cuMemcpyHtoDAsync,
	HP_cuMemcpyHtoD,
	HP_cuMemcpyDtoH,
	HP_cuEventCreate,
	HP_cuEventRecord,
	HP_cuEventSynchronize,
	HP_cuEventDestroy,
	HP_cuIpcGetMemHandle,
	HP_cuGetErrorName,
	HP_NCALLS
};

// hp_res is a driver result and the call that produced it.
typedef struct {
	int code; // CUresult
	int call; // enum hp_call
} hp_res;

typedef struct hp_driver hp_driver;

// hp_open dlopens path, resolves every entry point and calls cuInit(0). On
// a load failure it returns NULL with a message in err; if cuInit fails it
// returns NULL with *res set.
hp_driver *hp_open(const char *path, char *err, int errlen, hp_res *res);
const char *hp_call_name(int call);
// hp_error_name is cuGetErrorName, or NULL for a code it does not know.
const char *hp_error_name(hp_driver *d, int code);

// Functions with a CUcontext argument make it current on the calling thread
// first, inside the same C call (see copier_cuda.go).
hp_res hp_device_count(hp_driver *d, int *n);
hp_res hp_device_name(hp_driver *d, int ordinal, char *name, int len);
hp_res hp_device_total(hp_driver *d, int ordinal, size_t *bytes);
hp_res hp_ctx_retain(hp_driver *d, int ordinal, CUcontext *ctx);
hp_res hp_ctx_release(hp_driver *d, int ordinal);
hp_res hp_mem_info(hp_driver *d, CUcontext ctx, size_t *freeb, size_t *total);
hp_res hp_alloc(hp_driver *d, CUcontext ctx, size_t n, CUdeviceptr *p);
hp_res hp_free(hp_driver *d, CUcontext ctx, CUdeviceptr p);
hp_res hp_host_alloc(hp_driver *d, CUcontext ctx, size_t n, void **p);
hp_res hp_host_free(hp_driver *d, CUcontext ctx, void *p);
hp_res hp_stream_create(hp_driver *d, CUcontext ctx, CUstream *s);
hp_res hp_stream_destroy(hp_driver *d, CUcontext ctx, CUstream s);
hp_res hp_stream_sync(hp_driver *d, CUcontext ctx, CUstream s);
hp_res hp_event_create(hp_driver *d, CUcontext ctx, CUevent *e);
hp_res hp_event_destroy(hp_driver *d, CUcontext ctx, CUevent e);
hp_res hp_event_record(hp_driver *d, CUcontext ctx, CUevent e, CUstream s);
hp_res hp_event_sync(hp_driver *d, CUcontext ctx, CUevent e);
hp_res hp_copy_async(hp_driver *d, CUcontext ctx, CUdeviceptr dst, const void *src, size_t n, CUstream s);
hp_res hp_copy_htod(hp_driver *d, CUcontext ctx, CUdeviceptr dst, const void *src, size_t n);
hp_res hp_copy_dtoh(hp_driver *d, CUcontext ctx, void *dst, CUdeviceptr src, size_t n);
hp_res hp_ipc_handle(hp_driver *d, CUcontext ctx, CUdeviceptr p, void *handle64);

// Test hooks: look up and call the fake driver's control functions
// (testdata/fakecuda). hp_lib_open dlopens a library without initialising
// it; dlopen of the same path returns the same instance, which is how the
// tests reach the fake that hp_open loaded.
void *hp_lib_open(const char *path, char *err, int errlen);
void *hp_lib_sym(void *lib, const char *name);
long long hp_fn_ll_s(void *fn, const char *s);
int hp_fn_i_siii(void *fn, const char *s, int a, int b, int c);
int hp_fn_i_iull(void *fn, int a, unsigned long long b);
int hp_fn_i_pullpull(void *fn, const void *h, unsigned long long off, void *dst, unsigned long long n);

#endif
