// Package gpu stages tensors onto CUDA devices for a co-located inference
// process and hands it CUDA IPC handles.
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
// one device allocation per lease, so one IPC handle covers them all. The
// allocation's image is copied in Options.BufferSize pieces through a fixed
// pool of pinned host buffers (allocated once, on first use, and shared by
// every staging and device): a goroutine per held buffer reads its piece
// from the sources (many small tensors share one buffer and one copy),
// enqueues cuMemcpyHtoDAsync on the buffer's stream, records the buffer's
// event and waits on it before the buffer can be reused. Reads of later
// pieces thus overlap the copies of earlier ones on several streams.
//
// # Leases
//
// A lease lives until Release or until Options.LeaseTTL passes (Renew
// restarts it); a reaper goroutine frees expired leases, so a consumer that
// crashes never strands device memory. A lease is gone from the moment it
// expires, whether or not the reaper has freed it yet. Options.DeviceBudget
// caps the bytes leased per device; staging is refused with ErrBudget
// rather than left to fail in the driver. Memory the driver could not free,
// or that a copy might still be writing, stays counted until Close. The
// consumer must stop using its imported mapping before the lease ends.
//
// # Testing
//
// The pipeline, leases, budget and pool sit above the driver interface and
// a clock (clock.go), so plain
//
//	go test -race ./internal/gpu/
//
// tests them against a fake driver written in Go (fakedriver_test.go:
// device memory as byte slices, copies that run only when waited for,
// misuse checks, call counts, injected and sticky failures, allocation
// granularity, leak reports) and a manual clock that moves lease expiry
// without sleeping.
//
// The cuda-tagged tests prove the cgo boundary: they build a fake driver
// library (testdata/fakecuda, plain C: host memory, a worker thread per
// stream, per-thread contexts, call counters, injectable failures) with
// gcc and load it through Options.DriverPath, the same dlopen path the
// real driver takes:
//
//	go test -race -tags cuda ./internal/gpu/
//
// With HUBPROXY_TEST_CUDA_DRIVER=libcuda.so.1 those tests run against a
// real GPU, skipping the checks that need the fake's counters.
package gpu
