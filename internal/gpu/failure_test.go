package gpu

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// TestStageDriverFailureCleansUp injects a failure into each driver call a
// staging makes, on its first or a later call: the error names the CUDA
// call, nothing stays allocated or reserved, the fake sees no misuse, and
// the next Stage works.
func TestStageDriverFailureCleansUp(t *testing.T) {
	for _, tc := range []struct {
		method string
		after  int
	}{
		{"attach", 0},
		{"hostAlloc", 0},
		{"hostAlloc", 2},
		{"alloc", 0},
		{"copyAsync", 0},
		{"copyAsync", 3},
		{"record", 2},
		{"wait", 0},
		{"wait", 4},
		{"ipcHandle", 0},
	} {
		t.Run(tc.method, func(t *testing.T) {
			opts := smallOpts()
			r := newRig(t, opts, fakeConfig{})
			r.drv.inject(fakeFault{method: tc.method, after: tc.after, code: cudaErrorIllegalAddress})
			rng := rand.New(rand.NewPCG(1, uint64(tc.after)))
			srcs, _ := makeSources(rng, 30000, 100, 9000)
			_, err := r.c.Stage(context.Background(), 0, srcs)
			asDriverError(t, err, cudaCall(tc.method), cudaErrorIllegalAddress)
			r.expectClean(t)
			if n := r.leased(t, 0); n != 0 {
				t.Errorf("LeasedBytes = %d after a failed Stage", n)
			}
			if l := r.drv.live(); l.pinned != 0 && l.pinned != opts.PinnedBuffers {
				t.Errorf("%d pinned buffers live: a partial pool", l.pinned)
			}
			srcs, want := makeSources(rng, 30000, 100, 9000)
			l, err := r.c.Stage(context.Background(), 0, srcs)
			if err != nil {
				t.Fatalf("Stage after the failure: %v", err)
			}
			r.verify(t, l, want)
		})
	}
}

// TestStageOutOfDeviceMemory: with a budget above what the device has,
// the driver's own allocator refuses, here because of its granularity (the
// budget counts requested bytes); the failure surfaces as CUDA's, nothing
// more is reserved, and the copier stays usable.
func TestStageOutOfDeviceMemory(t *testing.T) {
	opts := smallOpts()
	opts.DeviceBudget = 8 << 20
	r := newRig(t, opts, fakeConfig{total: 4 << 20, granularity: 2 << 20})
	rng := rand.New(rand.NewPCG(2, 2))
	srcs, _ := makeSources(rng, 2<<20, 1) // 2 MiB + 256 B: two granules of the device's two
	l, err := r.c.Stage(context.Background(), 0, srcs)
	if err != nil {
		t.Fatal(err)
	}
	small, want := makeSources(rng, 5000)
	_, err = r.c.Stage(context.Background(), 0, small)
	asDriverError(t, err, "cuMemAlloc_v2", cudaErrorOutOfMemory)
	if de := driverErrors(err); de[0].Name != cudaErrorOutOfMemoryName {
		t.Errorf("Name = %q", de[0].Name)
	}
	if n := r.leased(t, 0); n != l.Bytes {
		t.Errorf("LeasedBytes = %d, want %d", n, l.Bytes)
	}
	if err := r.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	l2, err := r.c.Stage(context.Background(), 0, small)
	if err != nil {
		t.Fatal(err)
	}
	r.verify(t, l2, want)
}

// TestStageReaderErrorCleansUp: a source that fails or comes up short in
// the middle of a lease fails the staging with a *SourceError naming it,
// frees everything, and the pool is neither leaked nor pinned again.
func TestStageReaderErrorCleansUp(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		err     error
		wantErr error
	}{
		{"error", boom, boom},
		{"short read", io.EOF, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := smallOpts()
			r := newRig(t, opts, fakeConfig{})
			rng := rand.New(rand.NewPCG(3, 3))
			srcs, _ := makeSources(rng, 20000, 20000)
			data := make([]byte, 50000)
			srcs = append(srcs, Source{Name: "bad", R: &failingReader{data: data, failAt: 30000, err: tc.err}, Off: 1000, Len: 40000})
			_, err := r.c.Stage(context.Background(), 0, srcs)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Stage error %v, want %v", err, tc.wantErr)
			}
			var se *SourceError
			if !errors.As(err, &se) || se.Name != "bad" {
				t.Fatalf("error %v is not a *SourceError for \"bad\"", err)
			}
			r.expectClean(t)
			if n := r.leased(t, 0); n != 0 {
				t.Errorf("LeasedBytes = %d", n)
			}
			srcs, want := makeSources(rng, 20000)
			l, err := r.c.Stage(context.Background(), 0, srcs)
			if err != nil {
				t.Fatal(err)
			}
			r.verify(t, l, want)
			r.expectCount(t, "hostAlloc", opts.PinnedBuffers)
		})
	}
}

// TestStageCancelCleansUp cancels a staging while one of its reads is
// blocked: Stage returns without waiting for the reader and has freed the
// device memory; the blocked piece keeps its pinned buffer until the
// reader returns, and the copier keeps working meanwhile.
func TestStageCancelCleansUp(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	rng := rand.New(rand.NewPCG(4, 4))
	data := make([]byte, 40000)
	fillRandom(rng, data)
	g := newGatedReader(data, 20000)
	defer g.open()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := r.c.Stage(ctx, 0, []Source{{Name: "slow", R: g, Len: int64(len(data))}})
		errc <- err
	}()
	await(t, g.entered, "the reader to block")
	cancel()
	if err := await(t, errc, "Stage"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stage error %v, want context.Canceled", err)
	}
	r.expectClean(t) // the reader is still blocked here
	if n := r.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d", n)
	}
	srcs, want := makeSources(rng, 30000)
	l, err := r.c.Stage(context.Background(), 0, srcs)
	if err != nil {
		t.Fatalf("Stage while a cancelled reader is blocked: %v", err)
	}
	r.verify(t, l, want)
	g.open()
	// Cleanup's Close waits for the orphaned piece; the fake then checks
	// that its buffer was freed with the rest.
}

// TestStageCancelledBeforeAllocating: a context already done stops a
// staging before it allocates.
func TestStageCancelledBeforeAllocating(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srcs, _ := makeSources(rand.New(rand.NewPCG(5, 5)), 100)
	if _, err := r.c.Stage(ctx, 0, srcs); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stage error %v", err)
	}
	r.expectCount(t, "alloc", 0)
}

// TestNewCopierUnavailableWhenDeviceQueryFails: a driver that cannot
// describe its devices yields an unavailable copier whose calls say why.
func TestNewCopierUnavailableWhenDeviceQueryFails(t *testing.T) {
	opts, _ := Options{}.withDefaults()
	drv := newFakeDriver(fakeConfig{devices: 2})
	drv.checkAtEnd(t)
	drv.inject(fakeFault{method: "deviceTotal", dev: 1, code: cudaErrorUnknown})
	c := newCopier(opts, drv, newFakeClock())
	if c.Available() {
		t.Fatal("Available() = true")
	}
	_, err := c.Devices()
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("Devices: %v, want ErrUnavailable", err)
	}
	asDriverError(t, err, "cuDeviceTotalMem_v2", cudaErrorUnknown)
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}
