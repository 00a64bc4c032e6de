package gpu

// driver is the set of CUDA driver operations the copier is built from. The
// cgo implementation (copier_cuda.go) is the only one in the product; without
// the cuda tag openDriver reports ErrUnavailable instead. Keeping the
// pipeline, leases and budget on this side of the interface means none of
// that logic needs cgo or a build tag.
//
// Devices are driver ordinals. Streams and events are small indexes into the
// per-device sets that attach creates, so no C handle crosses into untagged
// code. Device pointers are CUdeviceptr values. Host slices passed to
// copyAsync must come from hostAlloc (pinned C memory); the others may be Go
// memory, which the driver uses only for the duration of the call.
//
// Every method that needs a CUDA context binds the device's context on the
// calling OS thread inside the same C call, so callers may use any goroutine.
type driver interface {
	deviceCount() int
	deviceName(dev int) (string, error)
	deviceTotal(dev int) (int64, error)

	// attach retains dev's primary context and creates its streams and its
	// events (created with blocking sync and no timing). detach undoes it.
	attach(dev, streams, events int) error
	detach(dev int) error
	memInfo(dev int) (free, total int64, err error)

	alloc(dev int, n int64) (uint64, error)
	free(dev int, p uint64) error
	ipcHandle(dev int, p uint64) ([]byte, error)

	// hostAlloc returns portable pinned memory, made in dev's context.
	hostAlloc(dev int, n int64) ([]byte, error)
	hostFree(dev int, b []byte) error

	// copyAsync enqueues a host-to-device copy of src (pinned) on a stream.
	copyAsync(dev, stream int, dst uint64, src []byte) error
	// record records an event on a stream; wait blocks until the work the
	// event captured is done.
	record(dev, event, stream int) error
	wait(dev, event int) error
	syncStream(dev, stream int) error

	// copyToHost and copyToDevice are synchronous copies with pageable host
	// memory: read-back, and the pageable side of Bench.
	copyToHost(dev int, dst []byte, src uint64) error
	copyToDevice(dev int, dst uint64, src []byte) error
	// pageable returns n bytes of ordinary (not pinned) C memory.
	pageable(n int64) ([]byte, error)
	freePageable(b []byte)
}
