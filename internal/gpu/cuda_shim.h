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
typedef struct { char bytes[16]; } CUuuid;

// The virtual memory management API's types, as cuda.h (CUDA 11+) lays
// them out; the enums are ints.
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct {
	int type; // CUmemLocationType
	int id;
} CUmemLocation;
typedef struct {
	int type;                 // CUmemAllocationType
	int requestedHandleTypes; // CUmemAllocationHandleType
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;
typedef struct {
	CUmemLocation location;
	int flags; // CUmemAccess_flags
} CUmemAccessDesc;

#define HP_MEMHOSTALLOC_PORTABLE 0x01    // CU_MEMHOSTALLOC_PORTABLE
#define HP_MEMHOSTREGISTER_PORTABLE 0x01 // CU_MEMHOSTREGISTER_PORTABLE
#define HP_STREAM_NON_BLOCKING 0x01      // CU_STREAM_NON_BLOCKING
#define HP_EVENT_BLOCKING_SYNC 0x01      // CU_EVENT_BLOCKING_SYNC
#define HP_EVENT_DISABLE_TIMING 0x02     // CU_EVENT_DISABLE_TIMING
#define HP_ATTR_VMM 102                  // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
#define HP_ATTR_POSIX_FD 103             // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
#define HP_ATTR_RDMA_VMM 110             // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
#define HP_MEM_ALLOCATION_TYPE_PINNED 1  // CU_MEM_ALLOCATION_TYPE_PINNED
#define HP_MEM_HANDLE_TYPE_POSIX_FD 1    // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
#define HP_MEM_LOCATION_TYPE_DEVICE 1    // CU_MEM_LOCATION_TYPE_DEVICE
#define HP_MEM_ACCESS_READWRITE 3        // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
#define HP_GRANULARITY_MINIMUM 0         // CU_MEM_ALLOC_GRANULARITY_MINIMUM
#define HP_GRANULARITY_RECOMMENDED 1     // CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
#define HP_DEFAULT_GRANULARITY (2u << 20) // cuMemAlloc's page where the driver cannot say
#define HP_NOT_SUPPORTED 801             // CUDA_ERROR_NOT_SUPPORTED

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
	HP_cuDeviceGetAttribute,
	HP_cuDeviceGetPCIBusId,
	HP_cuDevicePrimaryCtxReset,
	HP_cuCtxSynchronize,
	// Optional from here on: a driver without them still stages, without
	// UUIDs, VMM (the IPC fallback) or NUMA-placed buffers.
	HP_cuDeviceGetUuid,
	HP_cuMemGetAllocationGranularity,
	HP_cuMemCreate,
	HP_cuMemRelease,
	HP_cuMemAddressReserve,
	HP_cuMemAddressFree,
	HP_cuMemMap,
	HP_cuMemUnmap,
	HP_cuMemSetAccess,
	HP_cuMemExportToShareableHandle,
	HP_cuMemHostRegister,
	HP_cuMemHostUnregister,
	HP_cuMemImportFromShareableHandle, // only gpu vmmcheck imports: staging exports
	HP_NCALLS,
	HP_FIRST_OPTIONAL = HP_cuDeviceGetUuid,
	HP_mmap = HP_NCALLS, // not a driver call: host memory for a NUMA-placed buffer
};

// hp_res is a driver result and the call that produced it.
typedef struct {
	int code; // CUresult
	int call; // enum hp_call
} hp_res;

typedef struct hp_driver hp_driver;

// hp_open dlopens path, resolves every entry point (the optional ones may
// be missing: see enum hp_call) and calls cuInit(0). On
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

// Identity and recovery; none needs a context but hp_ctx_sync.
hp_res hp_device_uuid(hp_driver *d, int ordinal, unsigned char uuid16[16], int *ok);
hp_res hp_device_pci(hp_driver *d, int ordinal, char *buf, int len);
hp_res hp_device_vmm(hp_driver *d, int ordinal, int *vmm, int *rdma);
hp_res hp_ctx_reset(hp_driver *d, int ordinal);
hp_res hp_ctx_sync(hp_driver *d, CUcontext ctx);

// VMM: hp_vmm_alloc creates, reserves, maps and grants read-write access
// on ordinal, undoing what it did on a failure; hp_vmm_free undoes it all,
// trying every step and reporting the first failure.
int hp_has_vmm(hp_driver *d);
hp_res hp_granularity(hp_driver *d, CUcontext ctx, int ordinal, int rdma, size_t *g);
hp_res hp_vmm_alloc(hp_driver *d, CUcontext ctx, int ordinal, int rdma, size_t n, CUdeviceptr *p, CUmemGenericAllocationHandle *h);
hp_res hp_vmm_free(hp_driver *d, CUcontext ctx, CUdeviceptr p, size_t n, CUmemGenericAllocationHandle h);
hp_res hp_export_fd(hp_driver *d, CUcontext ctx, CUmemGenericAllocationHandle h, int *fd);

// The consumer's side, for gpu vmmcheck: hp_granularity_of is
// hp_granularity for option (HP_GRANULARITY_MINIMUM or _RECOMMENDED), with
// no default; hp_vmm_import imports an exported descriptor (the caller
// still closes it), reserves, maps and grants read-write access on
// ordinal, undoing what it did on a failure. hp_vmm_free undoes it.
hp_res hp_granularity_of(hp_driver *d, CUcontext ctx, int ordinal, int option, size_t *g);
hp_res hp_vmm_import(hp_driver *d, CUcontext ctx, int ordinal, int fd, size_t n, CUdeviceptr *p, CUmemGenericAllocationHandle *h);

// NUMA-placed pinned memory: mmap, mbind to node (preferred), then
// cuMemHostRegister (portable), which pins the pages where mbind says.
// hp_host_unregister undoes both; hp_host_unmap only unmaps, for buffers
// whose context (and registration with it) a reset already destroyed.
int hp_has_register(hp_driver *d);
hp_res hp_host_register(hp_driver *d, CUcontext ctx, size_t n, int node, void **p);
hp_res hp_host_unregister(hp_driver *d, CUcontext ctx, void *p, size_t n);
void hp_host_unmap(void *p, size_t n);

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
int hp_fn_i_i(void *fn, int a);
int hp_fn_i_iullpull(void *fn, int a, unsigned long long off, void *dst, unsigned long long n);

#endif
