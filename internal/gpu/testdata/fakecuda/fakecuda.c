// fakecuda.c: a fake CUDA driver library for hubproxy's tests. It exports
// the driver entry points internal/gpu loads (same names, same ABI) and
// implements them with host memory, so the cgo path, dlopen included, runs
// in CI without a GPU:
//
//   - device memory is malloc'd regions behind fake device pointers that are
//     never reused (a stale or double free is an error, not a silent hit);
//   - each stream is a worker thread running its queue in order, so async
//     copies really are asynchronous: they read the pinned source when they
//     run, and an event completes only when the work before it has;
//   - contexts are per-thread like the real ones: a call that needs one
//     fails with CUDA_ERROR_INVALID_CONTEXT unless the calling thread bound
//     a retained context with cuCtxSetCurrent;
//   - misuse the real driver would tolerate or punish unpredictably is
//     counted as a "violation": freeing memory with copies in flight,
//     reading device memory while copies into it are queued, releasing a
//     context that still owns objects.
//
// Control functions for tests: fake_configure, fake_fail, fake_calls,
// fake_live, fake_set_copy_delay, fake_ipc_read.
//
// Build: gcc -shared -fPIC -O2 -pthread -o libfakecuda.so fakecuda.c

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;

enum {
	SUCCESS = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	NOT_INITIALIZED = 3,
	NO_DEVICE = 100,
	INVALID_DEVICE = 101,
	INVALID_CONTEXT = 201,
	INVALID_HANDLE = 400,
};

#define MAXDEV 8
#define EXPORT __attribute__((visibility("default")))

struct CUctx_st {
	int dev;
	int refs;
};

struct alloc {
	CUdeviceptr ptr;
	size_t n;
	int dev;
	unsigned char *mem;
	unsigned long long id;
	int inflight; // queued copies into it
	struct alloc *next;
};

struct host {
	unsigned char *p;
	size_t n;
	int inflight; // queued copies from it
	struct host *next;
};

struct CUevent_st {
	struct CUctx_st *ctx;
	unsigned long long recorded, done;
};

enum { OP_COPY, OP_EVENT };

struct op {
	int kind;
	unsigned char *dst;
	const unsigned char *src;
	size_t n;
	struct alloc *a;
	struct host *h;
	struct CUevent_st *ev;
	unsigned long long gen;
	struct op *next;
};

struct CUstream_st {
	struct CUctx_st *ctx;
	pthread_t th;
	pthread_cond_t cv;
	struct op *head, *tail;
	int pending;
	int stop;
};

typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; // any queued op completed
static __thread struct CUctx_st *cur;

// Guarded by mu.
static int initialized;
static int ndev = 1;
static unsigned long long total_mem = 1ull << 30;
static unsigned long long used[MAXDEV];
static struct CUctx_st ctxs[MAXDEV];
static CUdeviceptr next_ptr[MAXDEV];
static unsigned long long next_id = 1;
static int copy_delay_us;
static struct alloc *allocs;
static struct host *hosts;
static long long live_alloc, live_host, live_stream, live_event, violations;

static struct counter {
	const char *name;
	long long n;
} counters[] = {
	{"cuInit", 0}, {"cuDeviceGetCount", 0}, {"cuDeviceGet", 0}, {"cuDeviceGetName", 0},
	{"cuDeviceTotalMem_v2", 0}, {"cuDevicePrimaryCtxRetain", 0}, {"cuDevicePrimaryCtxRelease_v2", 0},
	{"cuCtxSetCurrent", 0}, {"cuMemGetInfo_v2", 0}, {"cuMemAlloc_v2", 0}, {"cuMemFree_v2", 0},
	{"cuMemHostAlloc", 0}, {"cuMemFreeHost", 0}, {"cuStreamCreate", 0}, {"cuStreamDestroy_v2", 0},
	{"cuStreamSynchronize", 0}, {"cuMemcpyHtoDAsync_v2", 0}, {"cuMemcpyHtoD_v2", 0}, {"cuMemcpyDtoH_v2", 0},
	{"cuEventCreate", 0}, {"cuEventRecord", 0}, {"cuEventSynchronize", 0}, {"cuEventDestroy_v2", 0},
	{"cuIpcGetMemHandle", 0}, {"cuGetErrorName", 0},
	{"pageable_async", 0}, // cuMemcpyHtoDAsync_v2 from memory not from cuMemHostAlloc
	{NULL, 0},
};

static struct rule {
	char name[64];
	int code, after, count;
} rules[32];
static int nrules;

static struct counter *counter(const char *name) {
	for (struct counter *c = counters; c->name; c++)
		if (strcmp(c->name, name) == 0) return c;
	return NULL;
}

// enter counts a call and applies failure rules. Called with mu held.
static CUresult enter(const char *name) {
	struct counter *c = counter(name);
	if (c) c->n++;
	if (!initialized && strcmp(name, "cuInit") != 0) return NOT_INITIALIZED;
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (strcmp(r->name, name) != 0 || r->count == 0) continue;
		if (r->after > 0) {
			r->after--;
			continue;
		}
		if (r->count > 0) r->count--;
		return r->code;
	}
	return SUCCESS;
}

#define BEGIN(name)                        \
	pthread_mutex_lock(&mu);           \
	CUresult rc_ = enter(name);        \
	if (rc_ != SUCCESS) {              \
		pthread_mutex_unlock(&mu); \
		return rc_;                \
	}
#define RETURN(rc)                   \
	do {                         \
		CUresult r_ = (rc);  \
		pthread_mutex_unlock(&mu); \
		return r_;           \
	} while (0)
#define NEED_CTX() \
	if (cur == NULL || cur->refs == 0) RETURN(INVALID_CONTEXT)

static struct alloc *find_alloc(CUdeviceptr p, size_t n) {
	for (struct alloc *a = allocs; a; a = a->next)
		if (p >= a->ptr && p - a->ptr <= a->n && n <= a->n - (p - a->ptr)) return a;
	return NULL;
}

static struct host *find_host(const void *p, size_t n) {
	const unsigned char *q = p;
	for (struct host *h = hosts; h; h = h->next)
		if (q >= h->p && (size_t)(q - h->p) <= h->n && n <= h->n - (size_t)(q - h->p)) return h;
	return NULL;
}

static void enqueue(struct CUstream_st *s, struct op *o) {
	o->next = NULL;
	if (s->tail) s->tail->next = o;
	else s->head = o;
	s->tail = o;
	s->pending++;
	pthread_cond_signal(&s->cv);
}

static void *worker(void *arg) {
	struct CUstream_st *s = arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (s->head == NULL && !s->stop) pthread_cond_wait(&s->cv, &mu);
		if (s->head == NULL) break;
		struct op *o = s->head;
		int delay = copy_delay_us;
		pthread_mutex_unlock(&mu);
		if (o->kind == OP_COPY) {
			if (delay > 0) usleep(delay);
			memcpy(o->dst, o->src, o->n);
		}
		pthread_mutex_lock(&mu);
		s->head = o->next;
		if (s->head == NULL) s->tail = NULL;
		if (o->kind == OP_COPY) {
			o->a->inflight--;
			if (o->h) o->h->inflight--;
		} else if (o->gen > o->ev->done) {
			o->ev->done = o->gen;
		}
		s->pending--;
		free(o);
		pthread_cond_broadcast(&done_cv);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

EXPORT CUresult cuInit(unsigned int flags) {
	BEGIN("cuInit");
	if (flags != 0) RETURN(INVALID_VALUE);
	if (ndev == 0) RETURN(NO_DEVICE);
	initialized = 1;
	RETURN(SUCCESS);
}

EXPORT CUresult cuDeviceGetCount(int *n) {
	BEGIN("cuDeviceGetCount");
	*n = ndev;
	RETURN(SUCCESS);
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
	BEGIN("cuDeviceGet");
	if (ordinal < 0 || ordinal >= ndev) RETURN(INVALID_DEVICE);
	*dev = ordinal;
	RETURN(SUCCESS);
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
	BEGIN("cuDeviceGetName");
	if (dev < 0 || dev >= ndev) RETURN(INVALID_DEVICE);
	snprintf(name, len, "Fake CUDA Device %d", dev);
	RETURN(SUCCESS);
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
	BEGIN("cuDeviceTotalMem_v2");
	if (dev < 0 || dev >= ndev) RETURN(INVALID_DEVICE);
	*bytes = total_mem;
	RETURN(SUCCESS);
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
	BEGIN("cuDevicePrimaryCtxRetain");
	if (dev < 0 || dev >= ndev) RETURN(INVALID_DEVICE);
	ctxs[dev].dev = dev;
	ctxs[dev].refs++;
	*ctx = &ctxs[dev];
	RETURN(SUCCESS);
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
	BEGIN("cuDevicePrimaryCtxRelease_v2");
	if (dev < 0 || dev >= ndev) RETURN(INVALID_DEVICE);
	if (ctxs[dev].refs == 0) RETURN(INVALID_CONTEXT);
	if (--ctxs[dev].refs == 0) {
		// The real driver destroys the context and everything in it;
		// a caller relying on that has leaked.
		for (struct alloc *a = allocs; a; a = a->next)
			if (a->dev == dev) violations++;
	}
	RETURN(SUCCESS);
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
	BEGIN("cuCtxSetCurrent");
	if (ctx != NULL && (ctx < &ctxs[0] || ctx >= &ctxs[MAXDEV] || ctx->refs == 0)) RETURN(INVALID_CONTEXT);
	cur = ctx;
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemGetInfo_v2(size_t *freeb, size_t *total) {
	BEGIN("cuMemGetInfo_v2");
	NEED_CTX();
	*freeb = total_mem - used[cur->dev];
	*total = total_mem;
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	BEGIN("cuMemAlloc_v2");
	NEED_CTX();
	int dev = cur->dev;
	if (n == 0) RETURN(INVALID_VALUE);
	if (n > total_mem - used[dev]) RETURN(OUT_OF_MEMORY);
	struct alloc *a = calloc(1, sizeof *a);
	unsigned char *mem = malloc(n);
	if (a == NULL || mem == NULL) {
		free(a);
		free(mem);
		RETURN(OUT_OF_MEMORY);
	}
	memset(mem, 0xA5, n); // device memory starts as garbage
	if (next_ptr[dev] == 0) next_ptr[dev] = (CUdeviceptr)(dev + 1) << 40;
	a->ptr = next_ptr[dev];
	next_ptr[dev] += (n + 511) & ~(size_t)511; // never reused
	a->n = n;
	a->dev = dev;
	a->mem = mem;
	a->id = next_id++;
	a->next = allocs;
	allocs = a;
	used[dev] += n;
	live_alloc++;
	*p = a->ptr;
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
	BEGIN("cuMemFree_v2");
	NEED_CTX();
	struct alloc **pp = &allocs;
	while (*pp && (*pp)->ptr != p) pp = &(*pp)->next;
	if (*pp == NULL) {
		violations++; // double or wild free
		RETURN(INVALID_VALUE);
	}
	struct alloc *a = *pp;
	if (a->dev != cur->dev) RETURN(INVALID_CONTEXT);
	if (a->inflight > 0) {
		violations++;
		while (a->inflight > 0) pthread_cond_wait(&done_cv, &mu);
	}
	// Unlink again: the list may have changed while waiting.
	for (pp = &allocs; *pp != a; pp = &(*pp)->next) {
	}
	*pp = a->next;
	used[a->dev] -= a->n;
	live_alloc--;
	free(a->mem);
	free(a);
	RETURN(SUCCESS);
}

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
	h->next = hosts;
	hosts = h;
	live_host++;
	*p = mem;
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemFreeHost(void *p) {
	BEGIN("cuMemFreeHost");
	NEED_CTX();
	struct host **pp = &hosts;
	while (*pp && (*pp)->p != p) pp = &(*pp)->next;
	if (*pp == NULL) {
		violations++;
		RETURN(INVALID_VALUE);
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
	free(h->p);
	free(h);
	RETURN(SUCCESS);
}

EXPORT CUresult cuStreamCreate(CUstream *ps, unsigned int flags) {
	BEGIN("cuStreamCreate");
	NEED_CTX();
	(void)flags;
	struct CUstream_st *s = calloc(1, sizeof *s);
	if (s == NULL) RETURN(OUT_OF_MEMORY);
	s->ctx = cur;
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->th, NULL, worker, s) != 0) {
		free(s);
		RETURN(OUT_OF_MEMORY);
	}
	live_stream++;
	*ps = s;
	RETURN(SUCCESS);
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
	BEGIN("cuStreamDestroy_v2");
	NEED_CTX();
	if (s == NULL || s->ctx != cur) RETURN(INVALID_HANDLE);
	while (s->pending > 0) pthread_cond_wait(&done_cv, &mu);
	s->stop = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&mu);
	pthread_join(s->th, NULL);
	pthread_mutex_lock(&mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	live_stream--;
	RETURN(SUCCESS);
}

EXPORT CUresult cuStreamSynchronize(CUstream s) {
	BEGIN("cuStreamSynchronize");
	NEED_CTX();
	if (s == NULL || s->ctx != cur) RETURN(INVALID_HANDLE);
	while (s->pending > 0) pthread_cond_wait(&done_cv, &mu);
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
	BEGIN("cuMemcpyHtoDAsync_v2");
	NEED_CTX();
	if (s == NULL || s->ctx != cur) RETURN(INVALID_HANDLE);
	struct alloc *a = find_alloc(dst, n);
	if (a == NULL || a->dev != cur->dev || src == NULL) RETURN(INVALID_VALUE);
	struct host *h = find_host(src, n);
	if (h == NULL) counter("pageable_async")->n++;
	struct op *o = calloc(1, sizeof *o);
	if (o == NULL) RETURN(OUT_OF_MEMORY);
	o->kind = OP_COPY;
	o->dst = a->mem + (dst - a->ptr);
	o->src = src;
	o->n = n;
	o->a = a;
	o->h = h;
	a->inflight++;
	if (h) h->inflight++;
	enqueue(s, o);
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	BEGIN("cuMemcpyHtoD_v2");
	NEED_CTX();
	struct alloc *a = find_alloc(dst, n);
	if (a == NULL || a->dev != cur->dev || src == NULL) RETURN(INVALID_VALUE);
	memcpy(a->mem + (dst - a->ptr), src, n);
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	BEGIN("cuMemcpyDtoH_v2");
	NEED_CTX();
	struct alloc *a = find_alloc(src, n);
	if (a == NULL || a->dev != cur->dev || dst == NULL) RETURN(INVALID_VALUE);
	if (a->inflight > 0) violations++; // reading what async copies are still writing
	memcpy(dst, a->mem + (src - a->ptr), n);
	RETURN(SUCCESS);
}

EXPORT CUresult cuEventCreate(CUevent *pe, unsigned int flags) {
	BEGIN("cuEventCreate");
	NEED_CTX();
	(void)flags;
	struct CUevent_st *e = calloc(1, sizeof *e);
	if (e == NULL) RETURN(OUT_OF_MEMORY);
	e->ctx = cur;
	live_event++;
	*pe = e;
	RETURN(SUCCESS);
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
	BEGIN("cuEventRecord");
	NEED_CTX();
	if (e == NULL || e->ctx != cur || s == NULL || s->ctx != cur) RETURN(INVALID_HANDLE);
	struct op *o = calloc(1, sizeof *o);
	if (o == NULL) RETURN(OUT_OF_MEMORY);
	o->kind = OP_EVENT;
	o->ev = e;
	o->gen = ++e->recorded;
	enqueue(s, o);
	RETURN(SUCCESS);
}

EXPORT CUresult cuEventSynchronize(CUevent e) {
	BEGIN("cuEventSynchronize");
	NEED_CTX();
	if (e == NULL || e->ctx != cur) RETURN(INVALID_HANDLE);
	unsigned long long target = e->recorded;
	while (e->done < target) pthread_cond_wait(&done_cv, &mu);
	RETURN(SUCCESS);
}

EXPORT CUresult cuEventDestroy_v2(CUevent e) {
	BEGIN("cuEventDestroy_v2");
	NEED_CTX();
	if (e == NULL || e->ctx != cur) RETURN(INVALID_HANDLE);
	if (e->done < e->recorded) {
		violations++; // still queued: the worker would touch freed memory
		while (e->done < e->recorded) pthread_cond_wait(&done_cv, &mu);
	}
	free(e);
	live_event--;
	RETURN(SUCCESS);
}

// The fake handle: "FAKEIPC1", allocation id, device pointer, size, device.
EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
	BEGIN("cuIpcGetMemHandle");
	NEED_CTX();
	struct alloc *a = find_alloc(p, 0);
	if (a == NULL || a->ptr != p) RETURN(INVALID_VALUE);
	memset(h, 0, sizeof *h);
	memcpy(h->reserved, "FAKEIPC1", 8);
	memcpy(h->reserved + 8, &a->id, 8);
	memcpy(h->reserved + 16, &a->ptr, 8);
	unsigned long long n = a->n;
	memcpy(h->reserved + 24, &n, 8);
	memcpy(h->reserved + 32, &a->dev, 4);
	RETURN(SUCCESS);
}

static const struct {
	int code;
	const char *name;
} error_names[] = {
	{0, "CUDA_SUCCESS"},
	{1, "CUDA_ERROR_INVALID_VALUE"},
	{2, "CUDA_ERROR_OUT_OF_MEMORY"},
	{3, "CUDA_ERROR_NOT_INITIALIZED"},
	{4, "CUDA_ERROR_DEINITIALIZED"},
	{100, "CUDA_ERROR_NO_DEVICE"},
	{101, "CUDA_ERROR_INVALID_DEVICE"},
	{201, "CUDA_ERROR_INVALID_CONTEXT"},
	{400, "CUDA_ERROR_INVALID_HANDLE"},
	{600, "CUDA_ERROR_NOT_READY"},
	{700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
	{999, "CUDA_ERROR_UNKNOWN"},
};

EXPORT CUresult cuGetErrorName(CUresult code, const char **s) {
	pthread_mutex_lock(&mu);
	counter("cuGetErrorName")->n++;
	pthread_mutex_unlock(&mu);
	for (size_t i = 0; i < sizeof error_names / sizeof error_names[0]; i++) {
		if (error_names[i].code == code) {
			*s = error_names[i].name;
			return SUCCESS;
		}
	}
	return INVALID_VALUE;
}

// ---- control functions for tests ----

// fake_configure sets the device count and per-device memory (before cuInit).
EXPORT int fake_configure(int devices, unsigned long long total) {
	pthread_mutex_lock(&mu);
	if (devices >= 0 && devices <= MAXDEV) ndev = devices;
	if (total > 0) total_mem = total;
	pthread_mutex_unlock(&mu);
	return 0;
}

// fake_fail makes entry point name return code count times (-1: forever)
// once after further calls have succeeded.
EXPORT int fake_fail(const char *name, int code, int after, int count) {
	pthread_mutex_lock(&mu);
	int ok = nrules < (int)(sizeof rules / sizeof rules[0]);
	if (ok) {
		struct rule *r = &rules[nrules++];
		snprintf(r->name, sizeof r->name, "%s", name);
		r->code = code;
		r->after = after;
		r->count = count;
	}
	pthread_mutex_unlock(&mu);
	return ok ? 0 : -1;
}

// fake_calls returns how often an entry point was called, or -1 if unknown.
EXPORT long long fake_calls(const char *name) {
	pthread_mutex_lock(&mu);
	struct counter *c = counter(name);
	long long n = c ? c->n : -1;
	pthread_mutex_unlock(&mu);
	return n;
}

// fake_live returns live objects of a kind, or -1 for an unknown kind.
EXPORT long long fake_live(const char *kind) {
	long long n = -1;
	pthread_mutex_lock(&mu);
	if (strcmp(kind, "alloc") == 0) n = live_alloc;
	else if (strcmp(kind, "host") == 0) n = live_host;
	else if (strcmp(kind, "stream") == 0) n = live_stream;
	else if (strcmp(kind, "event") == 0) n = live_event;
	else if (strcmp(kind, "violations") == 0) n = violations;
	else if (strcmp(kind, "ctx") == 0) {
		n = 0;
		for (int i = 0; i < MAXDEV; i++) n += ctxs[i].refs;
	}
	pthread_mutex_unlock(&mu);
	return n;
}

// fake_set_copy_delay makes every queued copy sleep us microseconds first.
EXPORT int fake_set_copy_delay(int us, unsigned long long unused) {
	(void)unused;
	pthread_mutex_lock(&mu);
	copy_delay_us = us;
	pthread_mutex_unlock(&mu);
	return 0;
}

// fake_ipc_read reads n bytes at off from the allocation an IPC handle
// names, as a consumer that imported it would: 0 on success, -1 for a handle
// naming no live allocation, -2 for a range outside it.
EXPORT int fake_ipc_read(const void *handle, unsigned long long off, void *dst, unsigned long long n) {
	const unsigned char *h = handle;
	unsigned long long id;
	if (memcmp(h, "FAKEIPC1", 8) != 0) return -1;
	memcpy(&id, h + 8, 8);
	pthread_mutex_lock(&mu);
	struct alloc *a = allocs;
	while (a && a->id != id) a = a->next;
	int rc = 0;
	if (a == NULL) rc = -1;
	else if (off > a->n || n > a->n - off) rc = -2;
	else {
		if (a->inflight > 0) violations++;
		memcpy(dst, a->mem + off, n);
	}
	pthread_mutex_unlock(&mu);
	return rc;
}
