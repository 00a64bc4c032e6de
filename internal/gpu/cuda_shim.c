//go:build cuda && cgo && linux

// cuda_shim.c: dlopen-based access to the CUDA driver. The shim keeps no Go
// pointers: every pointer argument is used only for the duration of the
// call. Functions taking a CUcontext bind it on the calling thread first.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cuda_shim.h"

struct hp_driver {
	void *lib;
	CUresult (*cuInit)(unsigned int);
	CUresult (*cuDeviceGetCount)(int *);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDeviceGetName)(char *, int, CUdevice);
	CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuMemGetInfo)(size_t *, size_t *);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuMemHostAlloc)(void **, size_t, unsigned int);
	CUresult (*cuMemFreeHost)(void *);
	CUresult (*cuStreamCreate)(CUstream *, unsigned int);
	CUresult (*cuStreamDestroy)(CUstream);
	CUresult (*cuStreamSynchronize)(CUstream);
	CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*cuEventCreate)(CUevent *, unsigned int);
	CUresult (*cuEventRecord)(CUevent, CUstream);
	CUresult (*cuEventSynchronize)(CUevent);
	CUresult (*cuEventDestroy)(CUevent);
	CUresult (*cuIpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
	CUresult (*cuGetErrorName)(CUresult, const char **);
	CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*cuDeviceGetPCIBusId)(char *, int, CUdevice);
	CUresult (*cuDevicePrimaryCtxReset)(CUdevice);
	CUresult (*cuCtxSynchronize)(void);
	// Optional: NULL where the driver lacks them.
	CUresult (*cuDeviceGetUuid)(CUuuid *, CUdevice);
	CUresult (*cuMemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, int);
	CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
	CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*cuMemAddressFree)(CUdeviceptr, size_t);
	CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*cuMemUnmap)(CUdeviceptr, size_t);
	CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*cuMemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, int, unsigned long long);
	CUresult (*cuMemHostRegister)(void *, size_t, unsigned int);
	CUresult (*cuMemHostUnregister)(void *);
	CUresult (*cuMemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *, int);
};

// Symbol names as exported by libcuda. Where cuda.h maps an API to a
// versioned symbol (the _v2 ABI with 64-bit sizes and pointers), that symbol
// is listed first and the unversioned one is the fallback.
static const char *hp_names[HP_NCALLS] = {
	[HP_cuInit] = "cuInit",
	[HP_cuDeviceGetCount] = "cuDeviceGetCount",
	[HP_cuDeviceGet] = "cuDeviceGet",
	[HP_cuDeviceGetName] = "cuDeviceGetName",
	[HP_cuDeviceTotalMem] = "cuDeviceTotalMem_v2",
	[HP_cuDevicePrimaryCtxRetain] = "cuDevicePrimaryCtxRetain",
	[HP_cuDevicePrimaryCtxRelease] = "cuDevicePrimaryCtxRelease_v2",
	[HP_cuCtxSetCurrent] = "cuCtxSetCurrent",
	[HP_cuMemGetInfo] = "cuMemGetInfo_v2",
	[HP_cuMemAlloc] = "cuMemAlloc_v2",
	[HP_cuMemFree] = "cuMemFree_v2",
	[HP_cuMemHostAlloc] = "cuMemHostAlloc",
	[HP_cuMemFreeHost] = "cuMemFreeHost",
	[HP_cuStreamCreate] = "cuStreamCreate",
	[HP_cuStreamDestroy] = "cuStreamDestroy_v2",
	[HP_cuStreamSynchronize] = "cuStreamSynchronize",
	[HP_cuMemcpyHtoDAsync] = "cuMemcpyHtoDAsync_v2",
	[HP_cuMemcpyHtoD] = "cuMemcpyHtoD_v2",
	[HP_cuMemcpyDtoH] = "cuMemcpyDtoH_v2",
	[HP_cuEventCreate] = "cuEventCreate",
	[HP_cuEventRecord] = "cuEventRecord",
	[HP_cuEventSynchronize] = "cuEventSynchronize",
	[HP_cuEventDestroy] = "cuEventDestroy_v2",
	[HP_cuIpcGetMemHandle] = "cuIpcGetMemHandle",
	[HP_cuGetErrorName] = "cuGetErrorName",
	[HP_cuDeviceGetAttribute] = "cuDeviceGetAttribute",
	[HP_cuDeviceGetPCIBusId] = "cuDeviceGetPCIBusId",
	[HP_cuDevicePrimaryCtxReset] = "cuDevicePrimaryCtxReset_v2",
	[HP_cuCtxSynchronize] = "cuCtxSynchronize",
	[HP_cuDeviceGetUuid] = "cuDeviceGetUuid_v2",
	[HP_cuMemGetAllocationGranularity] = "cuMemGetAllocationGranularity",
	[HP_cuMemCreate] = "cuMemCreate",
	[HP_cuMemRelease] = "cuMemRelease",
	[HP_cuMemAddressReserve] = "cuMemAddressReserve",
	[HP_cuMemAddressFree] = "cuMemAddressFree",
	[HP_cuMemMap] = "cuMemMap",
	[HP_cuMemUnmap] = "cuMemUnmap",
	[HP_cuMemSetAccess] = "cuMemSetAccess",
	[HP_cuMemExportToShareableHandle] = "cuMemExportToShareableHandle",
	[HP_cuMemHostRegister] = "cuMemHostRegister_v2",
	[HP_cuMemHostUnregister] = "cuMemHostUnregister",
	[HP_cuMemImportFromShareableHandle] = "cuMemImportFromShareableHandle",
};

static const char *hp_fallback(int call) {
	switch (call) {
	case HP_cuDevicePrimaryCtxRelease: return "cuDevicePrimaryCtxRelease";
	case HP_cuStreamDestroy: return "cuStreamDestroy";
	case HP_cuEventDestroy: return "cuEventDestroy";
	case HP_cuDevicePrimaryCtxReset: return "cuDevicePrimaryCtxReset";
	case HP_cuDeviceGetUuid: return "cuDeviceGetUuid";
	}
	return NULL;
}

const char *hp_call_name(int call) {
	if (call == HP_mmap) return "mmap";
	if (call < 0 || call >= HP_NCALLS) return "unknown";
	return hp_names[call];
}

static void *hp_resolve(void *lib, int call) {
	void *p = dlsym(lib, hp_names[call]);
	if (p == NULL && hp_fallback(call) != NULL) p = dlsym(lib, hp_fallback(call));
	return p;
}

hp_driver *hp_open(const char *path, char *err, int errlen, hp_res *res) {
	res->code = 0;
	res->call = HP_cuInit;
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		snprintf(err, errlen, "%s", dlerror());
		return NULL;
	}
	void *syms[HP_NCALLS];
	for (int i = 0; i < HP_NCALLS; i++) {
		syms[i] = hp_resolve(lib, i);
		if (syms[i] == NULL && i < HP_FIRST_OPTIONAL) {
			snprintf(err, errlen, "%s: missing symbol %s", path, hp_names[i]);
			dlclose(lib);
			return NULL;
		}
	}
	hp_driver *d = calloc(1, sizeof *d);
	if (d == NULL) {
		snprintf(err, errlen, "out of host memory");
		dlclose(lib);
		return NULL;
	}
	d->lib = lib;
	d->cuInit = syms[HP_cuInit];
	d->cuDeviceGetCount = syms[HP_cuDeviceGetCount];
	d->cuDeviceGet = syms[HP_cuDeviceGet];
	d->cuDeviceGetName = syms[HP_cuDeviceGetName];
	d->cuDeviceTotalMem = syms[HP_cuDeviceTotalMem];
	d->cuDevicePrimaryCtxRetain = syms[HP_cuDevicePrimaryCtxRetain];
	d->cuDevicePrimaryCtxRelease = syms[HP_cuDevicePrimaryCtxRelease];
	d->cuCtxSetCurrent = syms[HP_cuCtxSetCurrent];
	d->cuMemGetInfo = syms[HP_cuMemGetInfo];
	d->cuMemAlloc = syms[HP_cuMemAlloc];
	d->cuMemFree = syms[HP_cuMemFree];
	d->cuMemHostAlloc = syms[HP_cuMemHostAlloc];
	d->cuMemFreeHost = syms[HP_cuMemFreeHost];
	d->cuStreamCreate = syms[HP_cuStreamCreate];
	d->cuStreamDestroy = syms[HP_cuStreamDestroy];
	d->cuStreamSynchronize = syms[HP_cuStreamSynchronize];
	d->cuMemcpyHtoDAsync = syms[HP_cuMemcpyHtoDAsync];
	d->cuMemcpyHtoD = syms[HP_cuMemcpyHtoD];
	d->cuMemcpyDtoH = syms[HP_cuMemcpyDtoH];
	d->cuEventCreate = syms[HP_cuEventCreate];
	d->cuEventRecord = syms[HP_cuEventRecord];
	d->cuEventSynchronize = syms[HP_cuEventSynchronize];
	d->cuEventDestroy = syms[HP_cuEventDestroy];
	d->cuIpcGetMemHandle = syms[HP_cuIpcGetMemHandle];
	d->cuGetErrorName = syms[HP_cuGetErrorName];
	d->cuDeviceGetAttribute = syms[HP_cuDeviceGetAttribute];
	d->cuDeviceGetPCIBusId = syms[HP_cuDeviceGetPCIBusId];
	d->cuDevicePrimaryCtxReset = syms[HP_cuDevicePrimaryCtxReset];
	d->cuCtxSynchronize = syms[HP_cuCtxSynchronize];
	d->cuDeviceGetUuid = syms[HP_cuDeviceGetUuid];
	d->cuMemGetAllocationGranularity = syms[HP_cuMemGetAllocationGranularity];
	d->cuMemCreate = syms[HP_cuMemCreate];
	d->cuMemRelease = syms[HP_cuMemRelease];
	d->cuMemAddressReserve = syms[HP_cuMemAddressReserve];
	d->cuMemAddressFree = syms[HP_cuMemAddressFree];
	d->cuMemMap = syms[HP_cuMemMap];
	d->cuMemUnmap = syms[HP_cuMemUnmap];
	d->cuMemSetAccess = syms[HP_cuMemSetAccess];
	d->cuMemExportToShareableHandle = syms[HP_cuMemExportToShareableHandle];
	d->cuMemHostRegister = syms[HP_cuMemHostRegister];
	d->cuMemHostUnregister = syms[HP_cuMemHostUnregister];
	d->cuMemImportFromShareableHandle = syms[HP_cuMemImportFromShareableHandle];
	res->code = d->cuInit(0);
	if (res->code != 0) {
		// The library stays loaded: libcuda does not support unloading.
		free(d);
		return NULL;
	}
	return d;
}

const char *hp_error_name(hp_driver *d, int code) {
	const char *s = NULL;
	if (d->cuGetErrorName(code, &s) != 0) return NULL;
	return s;
}

#define HP_RES(c, call) ((hp_res){(c), (call)})
#define HP_TRY(expr, call)                        \
	do {                                      \
		CUresult r_ = (expr);             \
		if (r_ != 0) return HP_RES(r_, call); \
	} while (0)
#define HP_BIND(d, ctx) HP_TRY((d)->cuCtxSetCurrent(ctx), HP_cuCtxSetCurrent)

hp_res hp_device_count(hp_driver *d, int *n) {
	HP_TRY(d->cuDeviceGetCount(n), HP_cuDeviceGetCount);
	return HP_RES(0, 0);
}

hp_res hp_device_name(hp_driver *d, int ordinal, char *name, int len) {
	CUdevice dev;
	HP_TRY(d->cuDeviceGet(&dev, ordinal), HP_cuDeviceGet);
	HP_TRY(d->cuDeviceGetName(name, len, dev), HP_cuDeviceGetName);
	return HP_RES(0, 0);
}

hp_res hp_device_total(hp_driver *d, int ordinal, size_t *bytes) {
	CUdevice dev;
	HP_TRY(d->cuDeviceGet(&dev, ordinal), HP_cuDeviceGet);
	HP_TRY(d->cuDeviceTotalMem(bytes, dev), HP_cuDeviceTotalMem);
	return HP_RES(0, 0);
}

hp_res hp_ctx_retain(hp_driver *d, int ordinal, CUcontext *ctx) {
	CUdevice dev;
	HP_TRY(d->cuDeviceGet(&dev, ordinal), HP_cuDeviceGet);
	HP_TRY(d->cuDevicePrimaryCtxRetain(ctx, dev), HP_cuDevicePrimaryCtxRetain);
	return HP_RES(0, 0);
}

hp_res hp_ctx_release(hp_driver *d, int ordinal) {
	CUdevice dev;
	HP_TRY(d->cuDeviceGet(&dev, ordinal), HP_cuDeviceGet);
	HP_TRY(d->cuDevicePrimaryCtxRelease(dev), HP_cuDevicePrimaryCtxRelease);
	return HP_RES(0, 0);
}

hp_res hp_mem_info(hp_driver *d, CUcontext ctx, size_t *freeb, size_t *total) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemGetInfo(freeb, total), HP_cuMemGetInfo);
	return HP_RES(0, 0);
}

hp_res hp_alloc(hp_driver *d, CUcontext ctx, size_t n, CUdeviceptr *p) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemAlloc(p, n), HP_cuMemAlloc);
	return HP_RES(0, 0);
}

hp_res hp_free(hp_driver *d, CUcontext ctx, CUdeviceptr p) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemFree(p), HP_cuMemFree);
	return HP_RES(0, 0);
}

hp_res hp_host_alloc(hp_driver *d, CUcontext ctx, size_t n, void **p) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemHostAlloc(p, n, HP_MEMHOSTALLOC_PORTABLE), HP_cuMemHostAlloc);
	return HP_RES(0, 0);
}

hp_res hp_host_free(hp_driver *d, CUcontext ctx, void *p) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemFreeHost(p), HP_cuMemFreeHost);
	return HP_RES(0, 0);
}

hp_res hp_stream_create(hp_driver *d, CUcontext ctx, CUstream *s) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuStreamCreate(s, HP_STREAM_NON_BLOCKING), HP_cuStreamCreate);
	return HP_RES(0, 0);
}

hp_res hp_stream_destroy(hp_driver *d, CUcontext ctx, CUstream s) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuStreamDestroy(s), HP_cuStreamDestroy);
	return HP_RES(0, 0);
}

hp_res hp_stream_sync(hp_driver *d, CUcontext ctx, CUstream s) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuStreamSynchronize(s), HP_cuStreamSynchronize);
	return HP_RES(0, 0);
}

hp_res hp_event_create(hp_driver *d, CUcontext ctx, CUevent *e) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuEventCreate(e, HP_EVENT_BLOCKING_SYNC | HP_EVENT_DISABLE_TIMING), HP_cuEventCreate);
	return HP_RES(0, 0);
}

hp_res hp_event_destroy(hp_driver *d, CUcontext ctx, CUevent e) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuEventDestroy(e), HP_cuEventDestroy);
	return HP_RES(0, 0);
}

hp_res hp_event_record(hp_driver *d, CUcontext ctx, CUevent e, CUstream s) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuEventRecord(e, s), HP_cuEventRecord);
	return HP_RES(0, 0);
}

hp_res hp_event_sync(hp_driver *d, CUcontext ctx, CUevent e) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuEventSynchronize(e), HP_cuEventSynchronize);
	return HP_RES(0, 0);
}

hp_res hp_copy_async(hp_driver *d, CUcontext ctx, CUdeviceptr dst, const void *src, size_t n, CUstream s) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemcpyHtoDAsync(dst, src, n, s), HP_cuMemcpyHtoDAsync);
	return HP_RES(0, 0);
}

hp_res hp_copy_htod(hp_driver *d, CUcontext ctx, CUdeviceptr dst, const void *src, size_t n) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemcpyHtoD(dst, src, n), HP_cuMemcpyHtoD);
	return HP_RES(0, 0);
}

hp_res hp_copy_dtoh(hp_driver *d, CUcontext ctx, void *dst, CUdeviceptr src, size_t n) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemcpyDtoH(dst, src, n), HP_cuMemcpyDtoH);
	return HP_RES(0, 0);
}

hp_res hp_ipc_handle(hp_driver *d, CUcontext ctx, CUdeviceptr p, void *handle64) {
	CUipcMemHandle h;
	HP_BIND(d, ctx);
	HP_TRY(d->cuIpcGetMemHandle(&h, p), HP_cuIpcGetMemHandle);
	memcpy(handle64, h.reserved, sizeof h.reserved);
	return HP_RES(0, 0);
}

hp_res hp_device_uuid(hp_driver *d, int ordinal, unsigned char uuid16[16], int *ok) {
	CUdevice dev;
	CUuuid u;
	*ok = 0;
	if (d->cuDeviceGetUuid == NULL) return HP_RES(0, 0);
	HP_TRY(d->cuDeviceGet(&dev, ordinal), HP_cuDeviceGet);
	HP_TRY(d->cuDeviceGetUuid(&u, dev), HP_cuDeviceGetUuid);
	memcpy(uuid16, u.bytes, 16);
	*ok = 1;
	return HP_RES(0, 0);
}

hp_res hp_device_pci(hp_driver *d, int ordinal, char *buf, int len) {
	CUdevice dev;
	HP_TRY(d->cuDeviceGet(&dev, ordinal), HP_cuDeviceGet);
	HP_TRY(d->cuDeviceGetPCIBusId(buf, len, dev), HP_cuDeviceGetPCIBusId);
	return HP_RES(0, 0);
}

int hp_has_vmm(hp_driver *d) {
	return d->cuMemGetAllocationGranularity && d->cuMemCreate && d->cuMemRelease && d->cuMemAddressReserve &&
	       d->cuMemAddressFree && d->cuMemMap && d->cuMemUnmap && d->cuMemSetAccess && d->cuMemExportToShareableHandle;
}

// hp_device_vmm reports VMM with POSIX descriptors, and whether such
// allocations may be made GPUDirect RDMA capable (an attribute older
// drivers may not know: its failure means no).
hp_res hp_device_vmm(hp_driver *d, int ordinal, int *vmm, int *rdma) {
	CUdevice dev;
	int a = 0, b = 0;
	*vmm = 0;
	*rdma = 0;
	if (!hp_has_vmm(d)) return HP_RES(0, 0);
	HP_TRY(d->cuDeviceGet(&dev, ordinal), HP_cuDeviceGet);
	HP_TRY(d->cuDeviceGetAttribute(&a, HP_ATTR_VMM, dev), HP_cuDeviceGetAttribute);
	HP_TRY(d->cuDeviceGetAttribute(&b, HP_ATTR_POSIX_FD, dev), HP_cuDeviceGetAttribute);
	*vmm = a && b;
	if (*vmm && d->cuDeviceGetAttribute(&a, HP_ATTR_RDMA_VMM, dev) == 0) *rdma = a != 0;
	return HP_RES(0, 0);
}

// hp_ctx_reset destroys the primary context with everything in it (the
// only way out of a sticky fault) and drops the reference attach took: a
// reset does not release it. The reference is dropped even when the reset
// fails, since the caller detaches either way and the next attach retains
// a new one; the first error is reported.
hp_res hp_ctx_reset(hp_driver *d, int ordinal) {
	CUdevice dev;
	HP_TRY(d->cuDeviceGet(&dev, ordinal), HP_cuDeviceGet);
	CUresult reset = d->cuDevicePrimaryCtxReset(dev);
	CUresult release = d->cuDevicePrimaryCtxRelease(dev);
	if (reset != 0) return HP_RES(reset, HP_cuDevicePrimaryCtxReset);
	if (release != 0) return HP_RES(release, HP_cuDevicePrimaryCtxRelease);
	return HP_RES(0, 0);
}

hp_res hp_ctx_sync(hp_driver *d, CUcontext ctx) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuCtxSynchronize(), HP_cuCtxSynchronize);
	return HP_RES(0, 0);
}

static CUmemAllocationProp hp_prop(int ordinal, int rdma) {
	CUmemAllocationProp p;
	memset(&p, 0, sizeof p);
	p.type = HP_MEM_ALLOCATION_TYPE_PINNED;
	p.requestedHandleTypes = HP_MEM_HANDLE_TYPE_POSIX_FD;
	p.location.type = HP_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = ordinal;
	p.allocFlags.gpuDirectRDMACapable = rdma != 0; // so consumers can register the weights with a NIC
	return p;
}

hp_res hp_granularity(hp_driver *d, CUcontext ctx, int ordinal, int rdma, size_t *g) {
	*g = HP_DEFAULT_GRANULARITY;
	if (d->cuMemGetAllocationGranularity == NULL) return HP_RES(0, 0);
	CUmemAllocationProp p = hp_prop(ordinal, rdma);
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemGetAllocationGranularity(g, &p, HP_GRANULARITY_MINIMUM), HP_cuMemGetAllocationGranularity);
	return HP_RES(0, 0);
}

// hp_vmm_map reserves n bytes of address space, maps allocation h there and
// lets device ordinal read and write it; on failure it undoes its steps and
// releases h, so the caller holds nothing. The current context is bound.
static hp_res hp_vmm_map(hp_driver *d, int ordinal, size_t n, CUdeviceptr *p, CUmemGenericAllocationHandle *h) {
	CUmemAccessDesc acc;
	memset(&acc, 0, sizeof acc);
	acc.location.type = HP_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = ordinal;
	acc.flags = HP_MEM_ACCESS_READWRITE;
	CUresult r = d->cuMemAddressReserve(p, n, 0, 0, 0);
	if (r != 0) {
		d->cuMemRelease(*h);
		return HP_RES(r, HP_cuMemAddressReserve);
	}
	r = d->cuMemMap(*p, n, 0, *h, 0);
	if (r != 0) {
		d->cuMemAddressFree(*p, n);
		d->cuMemRelease(*h);
		return HP_RES(r, HP_cuMemMap);
	}
	r = d->cuMemSetAccess(*p, n, &acc, 1);
	if (r != 0) {
		d->cuMemUnmap(*p, n);
		d->cuMemAddressFree(*p, n);
		d->cuMemRelease(*h);
		return HP_RES(r, HP_cuMemSetAccess);
	}
	return HP_RES(0, 0);
}

hp_res hp_vmm_alloc(hp_driver *d, CUcontext ctx, int ordinal, int rdma, size_t n, CUdeviceptr *p, CUmemGenericAllocationHandle *h) {
	if (!hp_has_vmm(d)) return HP_RES(HP_NOT_SUPPORTED, HP_cuMemCreate);
	CUmemAllocationProp prop = hp_prop(ordinal, rdma);
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemCreate(h, n, &prop, 0), HP_cuMemCreate);
	return hp_vmm_map(d, ordinal, n, p, h);
}

hp_res hp_vmm_free(hp_driver *d, CUcontext ctx, CUdeviceptr p, size_t n, CUmemGenericAllocationHandle h) {
	HP_BIND(d, ctx);
	hp_res first = HP_RES(0, 0);
	CUresult r = d->cuMemUnmap(p, n);
	if (r != 0) first = HP_RES(r, HP_cuMemUnmap);
	r = d->cuMemAddressFree(p, n);
	if (r != 0 && first.code == 0) first = HP_RES(r, HP_cuMemAddressFree);
	r = d->cuMemRelease(h);
	if (r != 0 && first.code == 0) first = HP_RES(r, HP_cuMemRelease);
	return first;
}

hp_res hp_export_fd(hp_driver *d, CUcontext ctx, CUmemGenericAllocationHandle h, int *fd) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemExportToShareableHandle(fd, h, HP_MEM_HANDLE_TYPE_POSIX_FD, 0), HP_cuMemExportToShareableHandle);
	return HP_RES(0, 0);
}

hp_res hp_granularity_of(hp_driver *d, CUcontext ctx, int ordinal, int option, size_t *g) {
	*g = 0;
	if (d->cuMemGetAllocationGranularity == NULL) return HP_RES(HP_NOT_SUPPORTED, HP_cuMemGetAllocationGranularity);
	CUmemAllocationProp p = hp_prop(ordinal, 0);
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemGetAllocationGranularity(g, &p, option), HP_cuMemGetAllocationGranularity);
	return HP_RES(0, 0);
}

hp_res hp_vmm_import(hp_driver *d, CUcontext ctx, int ordinal, int fd, size_t n, CUdeviceptr *p, CUmemGenericAllocationHandle *h) {
	if (!hp_has_vmm(d) || d->cuMemImportFromShareableHandle == NULL)
		return HP_RES(HP_NOT_SUPPORTED, HP_cuMemImportFromShareableHandle);
	HP_BIND(d, ctx);
	// The POSIX handle is passed by value, cast to a pointer, as the
	// driver documents for CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.
	HP_TRY(d->cuMemImportFromShareableHandle(h, (void *)(long)fd, HP_MEM_HANDLE_TYPE_POSIX_FD),
	       HP_cuMemImportFromShareableHandle);
	return hp_vmm_map(d, ordinal, n, p, h);
}

int hp_has_register(hp_driver *d) { return d->cuMemHostRegister && d->cuMemHostUnregister; }

#define HP_MPOL_PREFERRED 1 // <numaif.h>'s MPOL_PREFERRED, without libnuma

hp_res hp_host_register(hp_driver *d, CUcontext ctx, size_t n, int node, void **p) {
	unsigned long mask[16] = {0};
	if (node < 0 || node >= (int)(sizeof mask * 8)) return HP_RES(1, HP_mmap); // CUDA_ERROR_INVALID_VALUE
	void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) return HP_RES(2, HP_mmap); // CUDA_ERROR_OUT_OF_MEMORY
	mask[node / (8 * sizeof mask[0])] |= 1ul << (node % (8 * sizeof mask[0]));
	// Preferred, not bound: a full node spills to another rather than
	// failing. The pages do not exist yet; registration faults them in,
	// and the policy places them.
	syscall(SYS_mbind, m, n, HP_MPOL_PREFERRED, mask, sizeof mask * 8, 0);
	CUresult r = d->cuCtxSetCurrent(ctx);
	if (r != 0) {
		munmap(m, n);
		return HP_RES(r, HP_cuCtxSetCurrent);
	}
	r = d->cuMemHostRegister(m, n, HP_MEMHOSTREGISTER_PORTABLE);
	if (r != 0) {
		munmap(m, n);
		return HP_RES(r, HP_cuMemHostRegister);
	}
	*p = m;
	return HP_RES(0, 0);
}

hp_res hp_host_unregister(hp_driver *d, CUcontext ctx, void *p, size_t n) {
	HP_BIND(d, ctx);
	HP_TRY(d->cuMemHostUnregister(p), HP_cuMemHostUnregister);
	munmap(p, n);
	return HP_RES(0, 0);
}

void hp_host_unmap(void *p, size_t n) { munmap(p, n); }

void *hp_lib_open(const char *path, char *err, int errlen) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) snprintf(err, errlen, "%s", dlerror());
	return lib;
}

void *hp_lib_sym(void *lib, const char *name) { return dlsym(lib, name); }

long long hp_fn_ll_s(void *fn, const char *s) {
	return ((long long (*)(const char *))fn)(s);
}

int hp_fn_i_siii(void *fn, const char *s, int a, int b, int c) {
	return ((int (*)(const char *, int, int, int))fn)(s, a, b, c);
}

int hp_fn_i_iull(void *fn, int a, unsigned long long b) {
	return ((int (*)(int, unsigned long long))fn)(a, b);
}

int hp_fn_i_pullpull(void *fn, const void *h, unsigned long long off, void *dst, unsigned long long n) {
	return ((int (*)(const void *, unsigned long long, void *, unsigned long long))fn)(h, off, dst, n);
}

int hp_fn_i_i(void *fn, int a) { return ((int (*)(int))fn)(a); }

int hp_fn_i_iullpull(void *fn, int a, unsigned long long off, void *dst, unsigned long long n) {
	return ((int (*)(int, unsigned long long, void *, unsigned long long))fn)(a, off, dst, n);
}
