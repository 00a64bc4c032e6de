package gpu

// driver is the set of CUDA driver operations the copier is built from. The
// cgo implementation (copier_cuda.go) is the only one in the product; without
// the cuda tag openDriver reports ErrUnavailable instead. Keeping the
// pipeline, leases, budget and recovery on this side of the interface means
// none of that logic needs cgo or a build tag.
//
// Devices are driver ordinals. Streams and events are small indexes into the
// per-device sets that attach creates, so no C handle crosses into untagged
// code. Device pointers are CUdeviceptr values. Host slices passed to
// copyAsync must come from hostAlloc (pinned memory); the others may be Go
// memory, which the driver uses only for the duration of the call.
//
// Every method that needs a CUDA context binds the device's context on the
// calling OS thread inside the same C call, so callers may use any goroutine.
type driver interface {
	deviceCount() int
	deviceName(dev int) (string, error)
	deviceTotal(dev int) (int64, error)
	// identify names the device in a way that holds across processes and
	// says what it supports. It needs no context.
	identify(dev int) (deviceID, error)

	// attach retains dev's primary context and creates its streams and its
	// events (created with blocking sync and no timing). detach undoes it.
	attach(dev, streams, events int) error
	detach(dev int) error
	// reset destroys dev's primary context whatever it holds
	// (cuDevicePrimaryCtxReset), the only way out of a sticky fault, and
	// drops the copier's reference: every allocation, pinned buffer,
	// stream and event made in it is gone, and dev is detached.
	reset(dev int) error
	memInfo(dev int) (free, total int64, err error)
	// granularity is the allocation granularity of VMM allocations on dev
	// (cuMemGetAllocationGranularity), or the 2 MiB of cuMemAlloc's
	// allocator where the driver has no VMM API.
	granularity(dev int) (int64, error)

	// alloc, free and ipcHandle are the legacy path: cuMemAlloc memory and
	// its CUipcMemHandle (which shares the allocator's whole underlying
	// block, neighbours included, unless n is a multiple of granularity).
	alloc(dev int, n int64) (uint64, error)
	free(dev int, p uint64) error
	ipcHandle(dev int, p uint64) ([]byte, error)

	// vmmAlloc creates n bytes (a multiple of granularity) of physical
	// memory exportable as a POSIX file descriptor, and maps it readable
	// and writable on dev. vmmFree unmaps it and drops the copier's
	// reference; importers keep theirs. exportFD returns a new file
	// descriptor for the memory, owned by the caller.
	vmmAlloc(dev int, n int64) (vmem, error)
	vmmFree(dev int, m vmem) error
	exportFD(dev int, m vmem) (int, error)

	// hostAlloc returns portable pinned memory, made in dev's context and,
	// where node >= 0, placed on that host NUMA node.
	hostAlloc(dev int, n int64, node int) ([]byte, error)
	hostFree(dev int, b []byte) error

	// copyAsync enqueues a host-to-device copy of src (pinned) on a stream.
	copyAsync(dev, stream int, dst uint64, src []byte) error
	// record records an event on a stream; wait blocks until the work the
	// event captured is done.
	record(dev, event, stream int) error
	wait(dev, event int) error
	syncStream(dev, stream int) error
	// syncDevice waits for everything dev's context has queued
	// (cuCtxSynchronize), including the DMA a pageable cuMemcpyHtoD may
	// still run after it returned.
	syncDevice(dev int) error

	// copyToHost and copyToDevice are synchronous copies with pageable host
	// memory: read-back, and the pageable side of Bench.
	copyToHost(dev int, dst []byte, src uint64) error
	copyToDevice(dev int, dst uint64, src []byte) error
	// pageable returns n bytes of ordinary (not pinned) C memory.
	pageable(n int64) ([]byte, error)
	freePageable(b []byte)
}

// deviceID is what identify reports.
type deviceID struct {
	uuid     string // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
	pciBusID string // normalised, as sysfs writes it: "0000:3b:00.0"
	numaNode int    // -1 if unknown
	vmm      bool   // cuMemCreate with POSIX file descriptor handles works
	// rdma: VMM allocations can be GPUDirect RDMA capable (attribute
	// CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED), and
	// vmmAlloc makes them so.
	rdma bool
}

// vmem is one VMM allocation: the physical memory's handle and the
// address range it is mapped at.
type vmem struct {
	ptr    uint64 // CUdeviceptr of the mapping
	handle uint64 // CUmemGenericAllocationHandle
	size   int64
}
