// Package gpu stages tensors onto CUDA devices for a co-located inference
// process and hands the memory over to it.
//
// # Build
//
// The only code that touches CUDA is copier_cuda.go (and its C shim,
// cuda_shim.c), behind //go:build cuda && cgo && linux. It loads the driver
// library with dlopen at run time, so building needs no CUDA toolkit and a
// cuda-tagged binary still starts on a machine without a GPU. Without the
// tag, copier_nocuda.go makes Open return a Copier whose Available is false;
// callers check Available and never need tags themselves.
//
// # Staging
//
// Stage packs its sources, in order and at Options.Alignment offsets, into
// one device allocation per lease, rounded up to the device's allocation
// granularity, every byte outside the sources zeroed. The image is copied
// in Options.BufferSize pieces through the device's own pool of pinned host
// buffers (allocated on first use of the device, on its NUMA node, in its
// context): a goroutine per held buffer fills its piece with several
// concurrent reads of the sources, enqueues cuMemcpyHtoDAsync on the
// buffer's stream, records the buffer's event and waits on it before the
// buffer can be reused. Reads of later pieces thus overlap the copies of
// earlier ones on several streams.
//
// # Handover
//
// Where the driver supports it, a lease is a virtual memory management
// allocation (cuMemCreate, cuMemMap, cuMemSetAccess) exportable as a POSIX
// file descriptor (ExportFD; the admin API passes it over its Unix socket
// with SCM_RIGHTS). The consumer imports the descriptor and holds its own
// reference to the physical memory: a lease ending, a restart or a crash
// of hubproxy never takes its weights away, and no shared PID namespace is
// needed. The descriptor is a reference as well: the consumer closes it
// on every path, since one never imported keeps the memory allocated
// until it is closed. Elsewhere the legacy path remains, cuMemAlloc and a
// CUipcMemHandle, whose memory is freed when the lease ends, consumer or
// not; its rounding to the granularity keeps a lease alone in the block
// the handle shares.
//
// # Leases
//
// A held lease (StageOptions.Hold) lives until Release: the admin API
// releases it when the connection that staged it closes. Any other lease
// lives until Release or until Options.LeaseTTL passes (Renew restarts it);
// a reaper frees expired leases. A lease is gone from the moment it
// expires, whether or not the reaper has freed it yet.
//
// The budget per device is the free memory the driver reports less
// Options.DeviceHeadroom (capped by Options.DeviceBudget): it counts the
// granularity, context overheads and the inference process's own memory,
// and staging is refused with ErrBudget rather than left to fail in the
// driver. Memory the driver could not free, or that a copy might still be
// writing, stays counted until Close.
//
// # Faults
//
// A sticky error (an illegal address, a failed launch, an uncorrectable
// ECC error) kills the device's context. The copier marks the device
// failed, drops its leases, drains and reports Options.OnFatal, so that
// the process exits and is restarted; only with Options.ResetOnFault does
// it reset the primary context and attach again (health.go). Devices
// reports each device's health, faults and recoveries.
//
// # Testing
//
// The pipeline, leases, budget, pools, handover and recovery sit above the
// driver interface and a clock (clock.go), so plain
//
//	go test -race ./internal/gpu/
//
// tests them against a fake driver written in Go (fakedriver_test.go,
// fakemem_test.go, fakecopy_test.go: device memory as byte slices with a
// sub-allocator, VMM memory with reference counts and real exported file
// descriptors, an importer that reads garbage after an early free, copies
// that run only when waited for, context overhead, sticky faults that
// only a reset clears, misuse checks, call counts, leak reports) and a
// manual clock that moves lease expiry without sleeping.
//
// The cuda-tagged tests prove the cgo boundary: they build a fake driver
// library (testdata/fakecuda, plain C: host memory, a worker thread per
// stream, per-thread contexts, VMM and file descriptor export, sticky
// faults, call counters, injectable failures) with gcc and load it through
// Options.DriverPath, the same dlopen path the real driver takes:
//
//	go test -race -tags cuda ./internal/gpu/
//
// With HUBPROXY_TEST_CUDA_DRIVER=libcuda.so.1 those tests run against a
// real GPU, skipping the checks that need the fake's counters.
package gpu
