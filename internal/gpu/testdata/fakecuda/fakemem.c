// fakemem.c: device and host memory of the fake CUDA driver, and the
// consumer's side of both handovers. fakecuda.c includes it: compile that.

#include "fakecuda.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GARBAGE 0xDE // what freed memory holds by the time anyone reads it

// Guarded by mu.
static struct block *blocks;
static struct block *open_block[MAXDEV]; // where small allocations go
static struct phys *physs;
static CUdeviceptr next_ptr[MAXDEV];
static CUdeviceptr next_va = 0x7f0000000000ull; // VMM reservations
static unsigned long long next_id = 1;

static struct resv {
	CUdeviceptr ptr;
	size_t size;
	int dev; // context that reserved it
	struct resv *next;
} *resvs;


static CUdeviceptr take_ptr(int dev, size_t n) {
	if (next_ptr[dev] == 0) next_ptr[dev] = (CUdeviceptr)(dev + 1) << 40;
	CUdeviceptr p = next_ptr[dev];
	next_ptr[dev] += (n + GRAN - 1) / GRAN * GRAN; // never reused
	return p;
}

static void link_alloc(struct alloc *a) {
	a->id = next_id++;
	a->next = allocs;
	allocs = a;
	live_alloc++;
}

static void unlink_alloc(struct alloc *a) {
	struct alloc **pp = &allocs;
	while (*pp != a) pp = &(*pp)->next;
	*pp = a->next;
	live_alloc--;
}

// put_block drops a block nothing uses: no allocation, no importer.
static void put_block(struct block *b) {
	if (b->allocs > 0 || b->imports > 0 || open_block[b->dev] == b) return;
	struct block **pp = &blocks;
	while (*pp != b) pp = &(*pp)->next;
	*pp = b->next;
	free(b->mem);
	free(b);
}

static void put_phys(struct phys *p);

static void free_alloc(struct alloc *a) {
	unlink_alloc(a);
	if (a->ph) {
		a->ph->maps--;
		put_phys(a->ph);
	} else {
		memset(a->mem, GARBAGE, a->n); // as reuse would
		struct block *b = a->b;
		if (--b->allocs == 0) {
			used[b->dev] -= b->size;
			if (open_block[b->dev] == b) open_block[b->dev] = NULL;
			put_block(b);
		}
	}
	free(a);
}

// ---- legacy: cuMemAlloc, cuMemFree, cuIpcGetMemHandle ----

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	BEGIN("cuMemAlloc_v2");
	NEED_CTX();
	int dev = cur->dev;
	if (n == 0) RETURN(INVALID_VALUE);
	struct block *b = open_block[dev];
	size_t off = b ? (b->used + 511) & ~(size_t)511 : 0;
	if (n >= GRAN || b == NULL || off + n > b->size) {
		size_t size = (n + GRAN - 1) / GRAN * GRAN;
		if (size > total_mem - used[dev] - overhead) RETURN(OUT_OF_MEMORY);
		b = calloc(1, sizeof *b);
		unsigned char *mem = malloc(size);
		if (b == NULL || mem == NULL) {
			free(b);
			free(mem);
			RETURN(OUT_OF_MEMORY);
		}
		memset(mem, 0xA5, size); // device memory starts as garbage
		b->mem = mem;
		b->size = size;
		b->dev = dev;
		b->base = take_ptr(dev, size);
		b->next = blocks;
		blocks = b;
		used[dev] += size;
		off = 0;
		if (n < GRAN) open_block[dev] = b; // later small allocations share it
	}
	struct alloc *a = calloc(1, sizeof *a);
	if (a == NULL) RETURN(OUT_OF_MEMORY);
	b->used = off + n;
	b->allocs++;
	a->ptr = b->base + off;
	a->n = n;
	a->dev = dev;
	a->b = b;
	a->off = off;
	a->mem = b->mem + off;
	link_alloc(a);
	*p = a->ptr;
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
	BEGIN("cuMemFree_v2");
	NEED_CTX();
	struct alloc *a = allocs;
	while (a && a->ptr != p) a = a->next;
	if (a == NULL || a->ph) {
		violations++; // double, wild, or not cuMemAlloc's
		RETURN(INVALID_VALUE);
	}
	if (a->dev != cur->dev) RETURN(INVALID_CONTEXT);
	if (a->inflight > 0) {
		violations++;
		while (a->inflight > 0) pthread_cond_wait(&done_cv, &mu);
	}
	free_alloc(a);
	RETURN(SUCCESS);
}

// The fake handle: "FAKEIPC1", allocation id, device pointer, size, device.
EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
	BEGIN("cuIpcGetMemHandle");
	NEED_CTX();
	struct alloc *a = find_alloc(p, 0);
	if (a == NULL || a->ptr != p || a->ph) RETURN(INVALID_VALUE);
	memset(h, 0, sizeof *h);
	memcpy(h->reserved, "FAKEIPC1", 8);
	memcpy(h->reserved + 8, &a->id, 8);
	memcpy(h->reserved + 16, &a->ptr, 8);
	unsigned long long n = a->n;
	memcpy(h->reserved + 24, &n, 8);
	memcpy(h->reserved + 32, &a->dev, 4);
	RETURN(SUCCESS);
}

// ---- VMM ----
//
// VMM memory lives in a memfd: a header page ("FAKEVMM2", id, size,
// device) and the data after it, mapped shared. An exported descriptor is
// a new open file description of that memfd, so it can travel to another
// process (SCM_RIGHTS) and be imported there by this same library. What
// keeps the memory alive across processes is the kernel's own record of
// open descriptions: each export and each import takes an OFD lock on a
// byte of its own in the header, held until the last descriptor sharing
// that description is closed (or its process dies). The creator's memory
// is freed once its handle and mappings are gone and no such lock is held
// anywhere (reap_phys), as the driver frees an allocation only when the
// last of its handle, mappings, exported descriptors and imports is gone.

#define HDR 65536 // header size: the data starts on a page boundary on every page size
#define EXP_LOCKS 1024 // lock bytes [1024, 2048): one per exported description
#define IMP_LOCKS 2048 // lock bytes [2048, 4096): one per import
#define END_LOCKS 4096

// held reports whether another open description holds a lock in
// [start, start+len) of fd's file (an error counts as held: never free
// memory on a guess).
static int held(int fd, off_t start, off_t len) {
	struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
	if (fcntl(fd, F_OFD_GETLK, &l) != 0) return 1;
	return l.l_type != F_UNLCK;
}

// take_lock locks the first free byte of [from, to) through fd's
// description; it returns the byte's index from from, or -1.
static int take_lock(int fd, int from, int to) {
	for (int b = from; b < to; b++) {
		struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = b, .l_len = 1};
		if (fcntl(fd, F_OFD_SETLK, &l) == 0) return b - from;
	}
	return -1;
}

// reopen opens a new description of the file fd names.
static int reopen(int fd) {
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	return open(path, O_RDWR | O_CLOEXEC);
}

struct vmmhdr {
	char magic[8];
	unsigned long long id, size;
	int dev;
};

// map_import takes an import's reference on the memfd fd names: a
// description of its own holding an import lock, and the data mapped.
static int map_import(int fd, struct vmmhdr *h, int *ifd, unsigned char **mem) {
	if (pread(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h || memcmp(h->magic, "FAKEVMM2", 8) != 0 || h->size == 0)
		return -2;
	*ifd = reopen(fd);
	if (*ifd < 0) return -2;
	void *m = MAP_FAILED;
	if (take_lock(*ifd, IMP_LOCKS, END_LOCKS) >= 0)
		m = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, *ifd, HDR);
	if (m == MAP_FAILED) {
		close(*ifd);
		return -2;
	}
	*mem = m;
	return 0;
}

static int prop_ok(const CUmemAllocationProp *prop) {
	return prop && prop->type == 1 && prop->requestedHandleTypes == 1 && prop->location.type == 1 &&
	       prop->location.id >= 0 && prop->location.id < ndev && prop->win32HandleMetaData == NULL;
}

// The flag is refused where the device does not offer it, as the driver
// does.
static int prop_rdma_ok(const CUmemAllocationProp *prop) { return !prop->allocFlags[1] || rdma; }

EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, int option) {
	BEGIN("cuMemGetAllocationGranularity");
	if (novmm) RETURN(NOT_SUPPORTED); // as on a device without VMM
	if (!prop_ok(prop) || !prop_rdma_ok(prop) || (option != 0 && option != 1)) RETURN(INVALID_VALUE);
	*g = option == 1 ? 2 * GRAN : GRAN; // recommended, minimum
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
                            unsigned long long flags) {
	BEGIN("cuMemCreate");
	NEED_CTX();
	if (novmm) RETURN(NOT_SUPPORTED);
	if (!prop_ok(prop) || !prop_rdma_ok(prop) || flags != 0 || n == 0 || n % GRAN != 0) {
		violations++;
		RETURN(INVALID_VALUE);
	}
	int dev = prop->location.id;
	if (n > total_mem - used[dev] - overhead) RETURN(OUT_OF_MEMORY);
	struct phys *p = calloc(1, sizeof *p);
	int fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
	struct vmmhdr hdr = {.magic = "FAKEVMM2", .id = next_id, .size = n, .dev = dev};
	void *mem = MAP_FAILED;
	if (p && fd >= 0 && ftruncate(fd, HDR + n) == 0 && pwrite(fd, &hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr)
		mem = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, HDR);
	if (mem == MAP_FAILED) {
		free(p);
		if (fd >= 0) close(fd);
		RETURN(OUT_OF_MEMORY);
	}
	memset(mem, 0xA5, n);
	p->id = next_id++;
	p->size = n;
	p->mem = mem;
	p->fd = fd;
	p->dev = dev;
	p->handle = 1;
	p->rdma = prop->allocFlags[1];
	p->next = physs;
	physs = p;
	used[dev] += n;
	*h = p->id;
	RETURN(SUCCESS);
}

static struct phys *find_phys(CUmemGenericAllocationHandle h) {
	for (struct phys *p = physs; p; p = p->next)
		if (p->id == h && p->handle) return p;
	return NULL;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
	BEGIN("cuMemRelease");
	NEED_CTX();
	struct phys *p = find_phys(h);
	if (p == NULL) {
		violations++;
		RETURN(INVALID_VALUE);
	}
	p->handle = 0;
	put_phys(p);
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t n, size_t align, CUdeviceptr addr,
                                    unsigned long long flags) {
	BEGIN("cuMemAddressReserve");
	NEED_CTX();
	if (n == 0 || n % GRAN != 0 || flags != 0 || addr != 0 || (align != 0 && align % GRAN != 0)) RETURN(INVALID_VALUE);
	struct resv *r = calloc(1, sizeof *r);
	if (r == NULL) RETURN(OUT_OF_MEMORY);
	r->ptr = next_va;
	r->size = n;
	r->dev = cur->dev;
	next_va += n + GRAN; // never reused, and a gap between
	r->next = resvs;
	resvs = r;
	*ptr = r->ptr;
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t n) {
	BEGIN("cuMemAddressFree");
	NEED_CTX();
	struct resv **pp = &resvs;
	while (*pp && ((*pp)->ptr != ptr || (*pp)->size != n)) pp = &(*pp)->next;
	if (*pp == NULL || find_alloc(ptr, 0)) {
		violations++; // unknown, or still mapped
		RETURN(INVALID_VALUE);
	}
	struct resv *r = *pp;
	*pp = r->next;
	free(r);
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t n, size_t offset, CUmemGenericAllocationHandle h,
                         unsigned long long flags) {
	BEGIN("cuMemMap");
	NEED_CTX();
	struct resv *r = resvs;
	while (r && r->ptr != ptr) r = r->next;
	struct phys *p = find_phys(h);
	if (r == NULL || p == NULL || r->size != n || p->size != n || offset != 0 || flags != 0 || find_alloc(ptr, 0)) {
		violations++;
		RETURN(INVALID_VALUE);
	}
	struct alloc *a = calloc(1, sizeof *a);
	if (a == NULL) RETURN(OUT_OF_MEMORY);
	a->ptr = ptr;
	a->n = n;
	a->dev = p->dev;
	a->mem = p->mem;
	a->ph = p;
	p->maps++;
	link_alloc(a);
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t n, const CUmemAccessDesc *desc, size_t count) {
	BEGIN("cuMemSetAccess");
	NEED_CTX();
	struct alloc *a = find_alloc(ptr, n);
	if (a == NULL || a->ptr != ptr || a->n != n || !a->ph || count != 1 || desc->location.type != 1 ||
	    desc->location.id != a->dev || desc->flags != 3) {
		violations++;
		RETURN(INVALID_VALUE);
	}
	a->access = 1;
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t n) {
	BEGIN("cuMemUnmap");
	NEED_CTX();
	struct alloc *a = find_alloc(ptr, 0);
	if (a == NULL || a->ptr != ptr || a->n != n || !a->ph) {
		violations++;
		RETURN(INVALID_VALUE);
	}
	if (a->inflight > 0) {
		violations++;
		while (a->inflight > 0) pthread_cond_wait(&done_cv, &mu);
	}
	free_alloc(a);
	RETURN(SUCCESS);
}

// The exported descriptor is a new description of the memory's memfd,
// holding an export lock until it (and every copy of it, in any process)
// is closed: until then the memory stays allocated, released or not.
EXPORT CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h, int type,
                                             unsigned long long flags) {
	BEGIN("cuMemExportToShareableHandle");
	NEED_CTX();
	struct phys *p = find_phys(h);
	if (p == NULL || type != 1 || flags != 0) {
		violations++;
		RETURN(INVALID_VALUE);
	}
	int fd = reopen(p->fd);
	int b = fd < 0 ? -1 : take_lock(fd, EXP_LOCKS, IMP_LOCKS);
	if (b < 0) {
		if (fd >= 0) close(fd);
		RETURN(OUT_OF_MEMORY);
	}
	if (b + 1 > p->exports) p->exports = b + 1;
	*(int *)out = fd;
	RETURN(SUCCESS);
}

// cuMemImportFromShareableHandle makes a handle of this process for memory
// exported as a descriptor, here or in another process: a reference of its
// own, which outlives the descriptor (the caller's to close) and whatever
// the exporter does.
EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os, int type) {
	BEGIN("cuMemImportFromShareableHandle");
	NEED_CTX();
	struct vmmhdr hdr;
	int ifd;
	unsigned char *mem;
	if (type != 1 || map_import((int)(intptr_t)os, &hdr, &ifd, &mem) != 0) RETURN(INVALID_VALUE);
	struct phys *p = calloc(1, sizeof *p);
	if (p == NULL) {
		munmap(mem, hdr.size);
		close(ifd);
		RETURN(OUT_OF_MEMORY);
	}
	p->id = next_id++;
	p->size = hdr.size;
	p->mem = mem;
	p->fd = ifd;
	p->dev = cur->dev; // this process's ordinal of the device
	p->handle = 1;
	p->imported = 1;
	p->next = physs;
	physs = p;
	*h = p->id;
	RETURN(SUCCESS);
}

// put_phys frees p once nothing refers to it any more: for memory this
// process created, no handle, mapping, export or import anywhere.
static void put_phys(struct phys *p) {
	if (p->handle || p->maps > 0) return;
	if (!p->imported && held(p->fd, EXP_LOCKS, END_LOCKS - EXP_LOCKS)) return;
	struct phys **pp = &physs;
	while (*pp != p) pp = &(*pp)->next;
	*pp = p->next;
	if (!p->imported) used[p->dev] -= p->size;
	munmap(p->mem, p->size);
	close(p->fd);
	free(p);
}

void reap_phys(void) {
	for (struct phys *p = physs, *next; p; p = next) {
		next = p->next;
		put_phys(p);
	}
}

long long live_phys(void) {
	reap_phys();
	long long n = 0;
	for (struct phys *p = physs; p; p = p->next) n++;
	return n;
}

long long live_resv(void) {
	long long n = 0;
	for (struct resv *r = resvs; r; r = r->next) n++;
	return n;
}

long long live_rdma(void) {
	long long n = 0;
	for (struct phys *p = physs; p; p = p->next) n += p->rdma;
	return n;
}

// live_fds counts exported descriptions still open, in any process.
long long live_fds(void) {
	long long n = 0;
	for (struct phys *p = physs; p; p = p->next)
		for (int b = 0; b < p->exports; b++) n += held(p->fd, EXP_LOCKS + b, 1);
	return n;
}

// ---- host memory ----

EXPORT CUresult cuMemHostAlloc(void **p, size_t n, unsigned int flags) {
	BEGIN("cuMemHostAlloc");
	NEED_CTX();
	if (n == 0 || (flags & ~1u) != 0) RETURN(INVALID_VALUE);
	struct host *h = calloc(1, sizeof *h);
	unsigned char *mem = malloc(n);
	if (h == NULL || mem == NULL) {
		free(h);
		free(mem);
		RETURN(OUT_OF_MEMORY);
	}
	h->p = mem;
	h->n = n;
	h->dev = cur->dev;
	h->next = hosts;
	hosts = h;
	live_host++;
	*p = mem;
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) {
	BEGIN("cuMemHostRegister_v2");
	NEED_CTX();
	if (p == NULL || n == 0 || (flags & ~1u) != 0 || find_host(p, 1)) RETURN(INVALID_VALUE);
	struct host *h = calloc(1, sizeof *h);
	if (h == NULL) RETURN(OUT_OF_MEMORY);
	memset(p, 0, n); // pinning faults every page in
	h->p = p;
	h->n = n;
	h->dev = cur->dev;
	h->registered = 1;
	h->next = hosts;
	hosts = h;
	live_host++;
	RETURN(SUCCESS);
}

static CUresult drop_host(void *p, int registered) {
	struct host **pp = &hosts;
	while (*pp && (*pp)->p != p) pp = &(*pp)->next;
	if (*pp == NULL || (*pp)->registered != registered) {
		violations++;
		return INVALID_VALUE;
	}
	struct host *h = *pp;
	if (h->inflight > 0) {
		violations++;
		while (h->inflight > 0) pthread_cond_wait(&done_cv, &mu);
	}
	for (pp = &hosts; *pp != h; pp = &(*pp)->next) {
	}
	*pp = h->next;
	live_host--;
	if (!registered) free(h->p);
	free(h);
	return SUCCESS;
}

EXPORT CUresult cuMemFreeHost(void *p) {
	BEGIN("cuMemFreeHost");
	NEED_CTX();
	RETURN(drop_host(p, 0));
}

EXPORT CUresult cuMemHostUnregister(void *p) {
	BEGIN("cuMemHostUnregister");
	NEED_CTX();
	RETURN(drop_host(p, 1));
}

// drain_allocs frees everything a destroyed context of dev held: its
// mappings and legacy memory, its VMM handles, its pinned buffers (a
// registered buffer's memory is its owner's, only the registration goes).
// Called with mu held, after the context's streams have stopped.
void drain_allocs(int dev) {
	for (struct alloc **pp = &allocs; *pp;) {
		struct alloc *a = *pp;
		if (a->dev != dev) {
			pp = &a->next;
			continue;
		}
		free_alloc(a); // unlinks a
	}
	for (struct phys *p = physs, *next; p; p = next) {
		next = p->next;
		if (p->dev == dev && p->handle) {
			p->handle = 0;
			put_phys(p);
		}
	}
	for (struct resv **pp = &resvs; *pp;) {
		struct resv *r = *pp;
		if (r->dev != dev) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		free(r);
	}
	for (struct host **pp = &hosts; *pp;) {
		struct host *h = *pp;
		if (h->dev != dev) {
			pp = &h->next;
			continue;
		}
		*pp = h->next;
		live_host--;
		if (!h->registered) free(h->p);
		free(h);
	}
}

// ---- the consumer's side ----

static struct import {
	int live;
	unsigned char *mem; // fake_import_fd: the memfd's data, mapped shared
	int fd;             // fake_import_fd: its own description, holding an import lock
	struct block *b;    // fake_import_ipc: the whole block, no reference
	size_t off, size;   // where the allocation starts in b; bytes mapped
} imports[64];

static int new_import(void) {
	for (int i = 0; i < (int)(sizeof imports / sizeof imports[0]); i++)
		if (!imports[i].live) {
			memset(&imports[i], 0, sizeof imports[i]);
			imports[i].live = 1;
			return i;
		}
	return -1;
}

// fake_import_fd imports a descriptor cuMemExportToShareableHandle made,
// in this process or another, as cuMemImportFromShareableHandle and a
// mapping would, without a context: a reference of its own that outlives
// fd (still the caller's) and the exporter. -2: not such a descriptor.
EXPORT int fake_import_fd(int fd) {
	struct vmmhdr hdr;
	int ifd;
	unsigned char *mem;
	if (map_import(fd, &hdr, &ifd, &mem) != 0) return -2;
	pthread_mutex_lock(&mu);
	int slot = new_import();
	if (slot >= 0) {
		imports[slot].mem = mem;
		imports[slot].fd = ifd;
		imports[slot].size = hdr.size;
	}
	pthread_mutex_unlock(&mu);
	if (slot < 0) {
		munmap(mem, hdr.size);
		close(ifd);
	}
	return slot;
}

// fake_import_ipc opens an IPC handle as cuIpcOpenMemHandle would: it maps
// from the allocation to the end of its block and takes no reference.
EXPORT int fake_import_ipc(const void *handle, unsigned long long u1, void *u2, unsigned long long u3) {
	(void)u1, (void)u2, (void)u3;
	unsigned long long id;
	if (memcmp(handle, "FAKEIPC1", 8) != 0) return -2;
	memcpy(&id, (const char *)handle + 8, 8);
	pthread_mutex_lock(&mu);
	struct alloc *a = allocs;
	while (a && (a->id != id || a->ph)) a = a->next;
	int slot = a ? new_import() : -1;
	if (slot >= 0) {
		a->b->imports++;
		imports[slot].b = a->b;
		imports[slot].off = a->off;
		imports[slot].size = a->b->size - a->off;
	}
	pthread_mutex_unlock(&mu);
	return slot;
}

EXPORT int fake_import_read(int slot, unsigned long long off, void *dst, unsigned long long n) {
	int rc = 0;
	pthread_mutex_lock(&mu);
	struct import *im = slot >= 0 && slot < 64 && imports[slot].live ? &imports[slot] : NULL;
	if (im == NULL) rc = -1;
	else if (off > im->size || n > im->size - off) rc = -2;
	else memcpy(dst, im->mem ? im->mem + off : im->b->mem + im->off + off, n);
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT int fake_import_size(int slot) {
	pthread_mutex_lock(&mu);
	int n = slot >= 0 && slot < 64 && imports[slot].live ? (int)imports[slot].size : -1;
	pthread_mutex_unlock(&mu);
	return n;
}

EXPORT int fake_import_close(int slot) {
	pthread_mutex_lock(&mu);
	if (slot >= 0 && slot < 64 && imports[slot].live) {
		struct import *im = &imports[slot];
		im->live = 0;
		if (im->mem) {
			munmap(im->mem, im->size);
			close(im->fd); // drops its lock: the creator frees the memory if that was the last reference
			reap_phys();
		} else {
			im->b->imports--;
			put_block(im->b);
		}
	}
	pthread_mutex_unlock(&mu);
	return 0;
}
