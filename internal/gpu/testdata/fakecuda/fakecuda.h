// fakecuda.h: state shared by the fake CUDA driver's two parts (fakecuda.c:
// init, devices, contexts, streams, events, copies, controls; fakemem.c,
// which fakecuda.c includes: device memory, VMM, host memory, consumers'
// imports). See fakecuda.c.
#ifndef FAKECUDA_H
#define FAKECUDA_H

#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct { char reserved[64]; } CUipcMemHandle;
typedef struct { char bytes[16]; } CUuuid;
typedef struct { int type, id; } CUmemLocation;
typedef struct {
	int type, requestedHandleTypes;
	CUmemLocation location;
	void *win32HandleMetaData;
	unsigned char allocFlags[8];
} CUmemAllocationProp;
typedef struct {
	CUmemLocation location;
	int flags;
} CUmemAccessDesc;

enum {
	SUCCESS = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	NOT_INITIALIZED = 3,
	NO_DEVICE = 100,
	INVALID_DEVICE = 101,
	INVALID_CONTEXT = 201,
	INVALID_HANDLE = 400,
	NOT_SUPPORTED = 801,
};

#define MAXDEV 8
#define GRAN (2u << 20) // the allocation granularity, as on real GPUs
#define EXPORT __attribute__((visibility("default")))

struct CUctx_st {
	int dev;
	int refs;
	int dead; // the sticky code that killed it; 0 while healthy
};

// block is one block of the legacy allocator: small allocations share one.
struct block {
	CUdeviceptr base;
	size_t size, used;
	unsigned char *mem;
	int dev;
	int allocs;  // live allocations in it
	int imports; // consumers that opened an IPC handle into it
	struct block *next;
};

// phys is VMM physical memory, kept in a memfd so that another process can
// map it (fakemem.c). Memory cuMemCreate made (imported == 0) lives while
// its handle, a mapping, an exported descriptor or an import (in any
// process) does; an imported handle (cuMemImportFromShareableHandle) is
// this process's reference to memory made elsewhere.
struct phys {
	unsigned long long id;
	size_t size;
	unsigned char *mem; // the memfd's data, mapped shared
	int fd;             // this process's own description of the memfd
	int dev;
	int handle, maps;
	int imported;
	int exports; // lock bytes this process's exports probed (live_fds)
	int rdma;    // created with allocFlags.gpuDirectRDMACapable
	struct phys *next;
};

// alloc is a mapped device range: a legacy allocation (in a block) or a
// VMM mapping (of a phys).
struct alloc {
	CUdeviceptr ptr;
	size_t n;
	int dev;
	unsigned char *mem;
	unsigned long long id;
	struct block *b;
	size_t off; // in b
	struct phys *ph;
	int access;   // VMM: cuMemSetAccess granted read-write
	int inflight; // queued copies into it
	struct alloc *next;
};

struct host {
	unsigned char *p;
	size_t n;
	int dev;        // context that allocated or registered it
	int registered; // cuMemHostRegister: the memory is the caller's
	int inflight;   // queued copies from it
	struct host *next;
};

typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

extern pthread_mutex_t mu;
extern pthread_cond_t done_cv;
extern __thread struct CUctx_st *cur;
extern int initialized, ndev, novmm, rdma;
extern unsigned long long total_mem, overhead, used[MAXDEV];
extern struct CUctx_st ctxs[MAXDEV];
extern struct alloc *allocs;
extern struct host *hosts;
extern long long live_alloc, live_host, violations;

CUresult enter(const char *name);
void bump(const char *name);
struct alloc *find_alloc(CUdeviceptr p, size_t n);
struct host *find_host(const void *p, size_t n);
void drain_allocs(int dev); // frees what a destroyed context held (fakemem.c)
long long live_phys(void);
long long live_resv(void);
long long live_fds(void);
long long live_rdma(void);
void reap_phys(void); // frees memory whose last reference, maybe in another process, is gone

#define BEGIN(name)                        \
	pthread_mutex_lock(&mu);           \
	CUresult rc_ = enter(name);        \
	if (rc_ != SUCCESS) {              \
		pthread_mutex_unlock(&mu); \
		return rc_;                \
	}
#define RETURN(rc)                         \
	do {                               \
		CUresult r_ = (rc);        \
		pthread_mutex_unlock(&mu); \
		return r_;                 \
	} while (0)
#define NEED_CTX()                                            \
	if (cur == NULL || cur->refs == 0) RETURN(INVALID_CONTEXT); \
	if (cur->dead) RETURN(cur->dead)

#endif
