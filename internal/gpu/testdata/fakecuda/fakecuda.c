// fakecuda.c: a fake CUDA driver library for hubproxy's tests. It exports
// the driver entry points internal/gpu loads (same names, same ABI) and
// implements them with host memory, so the cgo path, dlopen included, runs
// in CI without a GPU. It fails the way the real driver does:
//
//   - device memory is malloc'd regions behind fake device pointers that are
//     never reused (a stale or double free is an error, not a silent hit);
//     cuMemAlloc sub-allocates small requests from shared 2 MiB blocks, and
//     an IPC handle opens the whole block, neighbours included (fakemem.c);
//   - VMM memory (cuMemCreate) lives in a memfd and is freed only when the
//     last of its handle, its mappings, its exported descriptors (open in
//     any process) and its imports (cuMemImportFromShareableHandle, in
//     any process) is gone, as the driver documents: an exported
//     descriptor never imported keeps it allocated (fakemem.c);
//   - cuMemGetInfo counts the context's own overhead (fake_set_overhead);
//   - each stream is a worker thread running its queue in order, so async
//     copies really are asynchronous: they read the pinned source when they
//     run, and an event completes only when the work before it has;
//   - contexts are per-thread like the real ones: a call that needs one
//     fails with CUDA_ERROR_INVALID_CONTEXT unless the calling thread bound
//     a retained context with cuCtxSetCurrent;
//   - an injected sticky code (700, 719, ECC, …) kills the calling thread's
//     context: every later call in it fails the same way until
//     cuDevicePrimaryCtxReset (or the last release) destroys it with
//     everything in it;
//   - misuse the real driver would tolerate or punish unpredictably is
//     counted as a "violation": freeing memory with copies in flight,
//     reading device memory while copies into it are queued, releasing a
//     healthy context that still owns objects.
//
// Control functions for tests: fake_configure, fake_fail (or the
// FAKECUDA_FAIL environment variable, read by cuInit), fake_calls,
// fake_live, fake_set_copy_delay, fake_set_novmm, fake_set_rdma,
// fake_set_overhead, and
// the consumer's fake_import_fd, fake_import_ipc, fake_import_read,
// fake_import_size, fake_import_close (fakemem.c).
//
// Build: gcc -shared -fPIC -O2 -pthread -o libfakecuda.so fakecuda.c
// (fakemem.c is included at the end: one file to compile, for every test
// that builds the fake.)

#include "fakecuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct CUevent_st {
	struct CUctx_st *ctx;
	unsigned long long recorded, done;
	struct CUevent_st *next;
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
	struct CUstream_st *next;
};

pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; // any queued op completed
__thread struct CUctx_st *cur;

// Guarded by mu.
int initialized, ndev = 1, novmm, rdma;
unsigned long long total_mem = 1ull << 30, overhead, used[MAXDEV];
struct CUctx_st ctxs[MAXDEV];
struct alloc *allocs;
struct host *hosts;
long long live_alloc, live_host, violations;
static long long live_stream, live_event;
static int copy_delay_us;
static struct CUstream_st *streams;
static struct CUevent_st *events;

static struct counter {
	const char *name;
	long long n;
} counters[] = {
	{"cuInit", 0}, {"cuDeviceGetCount", 0}, {"cuDeviceGet", 0}, {"cuDeviceGetName", 0},
	{"cuDeviceTotalMem_v2", 0}, {"cuDevicePrimaryCtxRetain", 0}, {"cuDevicePrimaryCtxRelease_v2", 0},
	{"cuDevicePrimaryCtxReset_v2", 0}, {"cuCtxSetCurrent", 0}, {"cuCtxSynchronize", 0},
	{"cuDeviceGetAttribute", 0}, {"cuDeviceGetPCIBusId", 0}, {"cuDeviceGetUuid_v2", 0},
	{"cuMemGetInfo_v2", 0}, {"cuMemAlloc_v2", 0}, {"cuMemFree_v2", 0},
	{"cuMemHostAlloc", 0}, {"cuMemFreeHost", 0}, {"cuMemHostRegister_v2", 0}, {"cuMemHostUnregister", 0},
	{"cuStreamCreate", 0}, {"cuStreamDestroy_v2", 0},
	{"cuStreamSynchronize", 0}, {"cuMemcpyHtoDAsync_v2", 0}, {"cuMemcpyHtoD_v2", 0}, {"cuMemcpyDtoH_v2", 0},
	{"cuEventCreate", 0}, {"cuEventRecord", 0}, {"cuEventSynchronize", 0}, {"cuEventDestroy_v2", 0},
	{"cuIpcGetMemHandle", 0}, {"cuGetErrorName", 0},
	{"cuMemGetAllocationGranularity", 0}, {"cuMemCreate", 0}, {"cuMemRelease", 0},
	{"cuMemAddressReserve", 0}, {"cuMemAddressFree", 0}, {"cuMemMap", 0}, {"cuMemUnmap", 0},
	{"cuMemSetAccess", 0}, {"cuMemExportToShareableHandle", 0}, {"cuMemImportFromShareableHandle", 0},
	{"pageable_async", 0}, // cuMemcpyHtoDAsync_v2 from memory not pinned by the driver
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

void bump(const char *name) {
	struct counter *c = counter(name);
	if (c) c->n++;
}

// sticky reports whether CUDA documents code as killing its context.
static int sticky(int code) {
	switch (code) {
	case 214: case 226: case 700: case 702: case 710: case 714: case 715: case 716: case 717: case 718: case 719:
	case 721: case 810: case 911:
		return 1;
	}
	return 0;
}

// enter counts a call and applies failure rules; a sticky failure kills
// the calling thread's context. Called with mu held.
CUresult enter(const char *name) {
	bump(name);
	if (!initialized && strcmp(name, "cuInit") != 0) return NOT_INITIALIZED;
	reap_phys(); // memory whose last descriptor or import went since the last call
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (strcmp(r->name, name) != 0 || r->count == 0) continue;
		if (r->after > 0) {
			r->after--;
			continue;
		}
		if (r->count > 0) r->count--;
		if (sticky(r->code) && cur != NULL && cur->refs > 0) cur->dead = r->code;
		return r->code;
	}
	return SUCCESS;
}

struct alloc *find_alloc(CUdeviceptr p, size_t n) {
	for (struct alloc *a = allocs; a; a = a->next)
		if (p >= a->ptr && p - a->ptr <= a->n && n <= a->n - (p - a->ptr)) return a;
	return NULL;
}

struct host *find_host(const void *p, size_t n) {
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

// stop_stream ends a stream's worker once its queue has run, and frees it.
// Called with mu held; releases it while joining.
static void stop_stream(struct CUstream_st *s) {
	for (struct CUstream_st **pp = &streams; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	s->stop = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&mu);
	pthread_join(s->th, NULL);
	pthread_mutex_lock(&mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	live_stream--;
}

// destroy_ctx ends device dev's context and everything in it: streams (their
// queues run out first), events, device memory, pinned buffers. Imported VMM
// memory survives: the import is the consumer's own reference.
static void destroy_ctx(int dev) {
	struct CUctx_st *ctx = &ctxs[dev];
	for (;;) {
		struct CUstream_st *s = streams;
		while (s && s->ctx != ctx) s = s->next;
		if (s == NULL) break;
		stop_stream(s);
	}
	for (struct CUevent_st **pp = &events; *pp;) {
		struct CUevent_st *e = *pp;
		if (e->ctx != ctx) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		free(e);
		live_event--;
	}
	drain_allocs(dev);
	ctx->dead = 0;
}

static int add_rule(const char *name, int code, int after, int count);

// env_rules reads FAKECUDA_FAIL, for tests that run the fake in a process
// they cannot reach with fake_fail (a hubproxy binary): rules separated by
// commas, each "entry:code[:after:N][:count:M]" (count -1, the default:
// every call from then on), e.g. "cuMemcpyHtoDAsync_v2:700:after:3".
static void env_rules(void) {
	const char *env = getenv("FAKECUDA_FAIL");
	if (env == NULL) return;
	char buf[512];
	snprintf(buf, sizeof buf, "%s", env);
	char *save = NULL;
	for (char *r = strtok_r(buf, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
		char *f = NULL, *name = strtok_r(r, ":", &f), *code = strtok_r(NULL, ":", &f);
		int after = 0, count = -1;
		for (char *k; (k = strtok_r(NULL, ":", &f)) != NULL;) {
			char *v = strtok_r(NULL, ":", &f);
			if (v == NULL) break;
			if (strcmp(k, "after") == 0) after = atoi(v);
			else if (strcmp(k, "count") == 0) count = atoi(v);
		}
		if (name && code) {
			add_rule(name, atoi(code), after, count);
			fprintf(stderr, "fakecuda: FAKECUDA_FAIL: %s fails with %d after %d calls, %d times\n", name, atoi(code), after, count);
		}
	}
}

static pthread_once_t env_once = PTHREAD_ONCE_INIT;

EXPORT CUresult cuInit(unsigned int flags) {
	pthread_once(&env_once, env_rules); // before the lock: add_rule takes it
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

// The fake's UUIDs and PCI bus ids: fakeCUDAUUID and fakeCUDAPCI in the tests.
EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice dev) {
	BEGIN("cuDeviceGetUuid_v2");
	if (dev < 0 || dev >= ndev) RETURN(INVALID_DEVICE);
	for (int i = 0; i < 16; i++) u->bytes[i] = (char)(i == 0 ? 0xc0 : i == 1 ? dev : i);
	RETURN(SUCCESS);
}

EXPORT CUresult cuDeviceGetPCIBusId(char *buf, int len, CUdevice dev) {
	BEGIN("cuDeviceGetPCIBusId");
	if (dev < 0 || dev >= ndev || len < 13) RETURN(INVALID_VALUE);
	snprintf(buf, len, "0000:%02X:00.0", 0x3b + dev); // upper case, as the driver writes it
	RETURN(SUCCESS);
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev) {
	BEGIN("cuDeviceGetAttribute");
	if (dev < 0 || dev >= ndev) RETURN(INVALID_DEVICE);
	switch (attr) {
	case 102: case 103: *v = !novmm; break; // VMM, POSIX file descriptor handles
	case 110: *v = !novmm && rdma; break;   // GPUDirect RDMA with VMM allocations
	default: *v = 0;
	}
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
		// The real driver destroys the context and everything in it; a
		// caller relying on that for a healthy context has leaked.
		if (!ctxs[dev].dead)
			for (struct alloc *a = allocs; a; a = a->next)
				if (a->dev == dev) violations++;
		destroy_ctx(dev);
	}
	RETURN(SUCCESS);
}

EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
	BEGIN("cuDevicePrimaryCtxReset_v2");
	if (dev < 0 || dev >= ndev) RETURN(INVALID_DEVICE);
	destroy_ctx(dev); // the retain count stays: reset does not release
	RETURN(SUCCESS);
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
	BEGIN("cuCtxSetCurrent");
	if (ctx != NULL && (ctx < &ctxs[0] || ctx >= &ctxs[MAXDEV] || ctx->refs == 0)) RETURN(INVALID_CONTEXT);
	cur = ctx;
	RETURN(SUCCESS);
}

EXPORT CUresult cuCtxSynchronize(void) {
	BEGIN("cuCtxSynchronize");
	NEED_CTX();
	for (;;) {
		struct CUstream_st *s = streams;
		while (s && (s->ctx != cur || s->pending == 0)) s = s->next;
		if (s == NULL) break;
		pthread_cond_wait(&done_cv, &mu);
	}
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemGetInfo_v2(size_t *freeb, size_t *total) {
	BEGIN("cuMemGetInfo_v2");
	NEED_CTX();
	unsigned long long u = used[cur->dev] + overhead;
	*freeb = u >= total_mem ? 0 : total_mem - u;
	*total = total_mem;
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
	s->next = streams;
	streams = s;
	live_stream++;
	*ps = s;
	RETURN(SUCCESS);
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
	BEGIN("cuStreamDestroy_v2");
	NEED_CTX();
	if (s == NULL || s->ctx != cur) RETURN(INVALID_HANDLE);
	while (s->pending > 0) pthread_cond_wait(&done_cv, &mu);
	stop_stream(s);
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
	if (a->ph && !a->access) {
		violations++; // a mapping nobody granted access to
		RETURN(INVALID_VALUE);
	}
	struct host *h = find_host(src, n);
	if (h == NULL) bump("pageable_async");
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
	if (a->ph && !a->access) {
		violations++;
		RETURN(INVALID_VALUE);
	}
	memcpy(a->mem + (dst - a->ptr), src, n);
	RETURN(SUCCESS);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	BEGIN("cuMemcpyDtoH_v2");
	NEED_CTX();
	struct alloc *a = find_alloc(src, n);
	if (a == NULL || a->dev != cur->dev || dst == NULL) RETURN(INVALID_VALUE);
	if (a->ph && !a->access) {
		violations++;
		RETURN(INVALID_VALUE);
	}
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
	e->next = events;
	events = e;
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
	for (struct CUevent_st **pp = &events; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	free(e);
	live_event--;
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
	{214, "CUDA_ERROR_ECC_UNCORRECTABLE"},
	{400, "CUDA_ERROR_INVALID_HANDLE"},
	{600, "CUDA_ERROR_NOT_READY"},
	{226, "CUDA_ERROR_CONTAINED"},
	{700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
	{719, "CUDA_ERROR_LAUNCH_FAILED"},
	{801, "CUDA_ERROR_NOT_SUPPORTED"},
	{999, "CUDA_ERROR_UNKNOWN"},
};

EXPORT CUresult cuGetErrorName(CUresult code, const char **s) {
	pthread_mutex_lock(&mu);
	bump("cuGetErrorName");
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

// fake_set_novmm makes the devices report no VMM support.
EXPORT int fake_set_novmm(int on, unsigned long long unused) {
	(void)unused;
	pthread_mutex_lock(&mu);
	novmm = on;
	pthread_mutex_unlock(&mu);
	return 0;
}

// fake_set_rdma makes the devices report GPUDirect RDMA with VMM
// allocations (attribute 110), and accept cuMemCreate's flag for it.
EXPORT int fake_set_rdma(int on, unsigned long long unused) {
	(void)unused;
	pthread_mutex_lock(&mu);
	rdma = on;
	pthread_mutex_unlock(&mu);
	return 0;
}

// fake_set_overhead makes each retained context take n bytes of its device.
EXPORT int fake_set_overhead(int unused, unsigned long long n) {
	(void)unused;
	pthread_mutex_lock(&mu);
	overhead = n;
	pthread_mutex_unlock(&mu);
	return 0;
}

// fake_fail makes entry point name return code count times (-1: forever)
// once after further calls have succeeded.
EXPORT int fake_fail(const char *name, int code, int after, int count) { return add_rule(name, code, after, count); }

static int add_rule(const char *name, int code, int after, int count) {
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

// fake_live returns live objects of a kind, or -1 for an unknown kind:
// alloc (legacy allocations and VMM mappings), phys (VMM memory with a
// handle, mapping, open exported descriptor or import, and imported
// handles), rdma (of those, made GPUDirect RDMA capable), resv (VMM
// address reservations), fd (exported descriptions still open in any
// process), host,
// stream, event, ctx (references), dead (dead contexts), violations.
EXPORT long long fake_live(const char *kind) {
	long long n = -1;
	pthread_mutex_lock(&mu);
	if (strcmp(kind, "alloc") == 0) n = live_alloc;
	else if (strcmp(kind, "phys") == 0) n = live_phys();
	else if (strcmp(kind, "resv") == 0) n = live_resv();
	else if (strcmp(kind, "fd") == 0) n = live_fds();
	else if (strcmp(kind, "host") == 0) n = live_host;
	else if (strcmp(kind, "stream") == 0) n = live_stream;
	else if (strcmp(kind, "event") == 0) n = live_event;
	else if (strcmp(kind, "violations") == 0) n = violations;
	else if (strcmp(kind, "rdma") == 0) {
		n = live_rdma();
	}
	else if (strcmp(kind, "ctx") == 0 || strcmp(kind, "dead") == 0) {
		n = 0;
		for (int i = 0; i < MAXDEV; i++) n += kind[0] == 'c' ? ctxs[i].refs : ctxs[i].dead != 0;
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

#include "fakemem.c"
