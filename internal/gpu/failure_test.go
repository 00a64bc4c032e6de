package gpu

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// TestStageDriverFailureCleansUp injects a failure (one that leaves the
// context usable, as most do) into each driver call a staging makes, on
// its first or a later call, for both handovers: the error names the CUDA
// call, nothing stays allocated or reserved, the fake sees no misuse, and
// the next Stage works. Sticky faults, after which it cannot, are
// recovery_test.go's.
func TestStageDriverFailureCleansUp(t *testing.T) {
	for _, tc := range []struct {
		method string
		after  int
		ipc    bool
	}{
		{"attach", 0, false},
		{"granularity", 0, false},
		{"hostAlloc", 0, false},
		{"hostAlloc", 2, false},
		{"memInfo", 0, false},
		{"vmmAlloc", 0, false},
		{"alloc", 0, true},
		{"copyAsync", 0, false},
		{"copyAsync", 3, true},
		{"record", 2, false},
		{"wait", 0, true},
		{"wait", 4, false},
		{"ipcHandle", 0, true},
	} {
		t.Run(tc.method, func(t *testing.T) {
			opts := smallOpts()
			r := newRig(t, opts, fakeConfig{noVMM: tc.ipc})
			r.drv.inject(fakeFault{method: tc.method, after: tc.after, code: cudaErrorUnknown})
			rng := rand.New(rand.NewPCG(1, uint64(tc.after)))
			srcs, _ := makeSources(rng, 30000, 100, 9000)
			_, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
			asDriverError(t, err, cudaCall(tc.method), cudaErrorUnknown)
			r.expectClean(t)
			if n := r.leased(t, 0); n != 0 {
				t.Errorf("LeasedBytes = %d after a failed Stage", n)
			}
			if l := r.drv.live(); l.pinned != 0 && l.pinned != opts.PinnedBuffers {
				t.Errorf("%d pinned buffers live: a partial pool", l.pinned)
			}
			srcs, want := makeSources(rng, 30000, 100, 9000)
			l := r.stage(t, 0, srcs)
			r.verify(t, l, want)
		})
	}
}

// TestStageOutOfDeviceMemory: where the driver's allocator refuses
// although the budget admitted the staging (its free figure raced another
// process), the failure surfaces as CUDA's, nothing stays reserved, and
// the copier stays usable.
func TestStageOutOfDeviceMemory(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	rng := rand.New(rand.NewPCG(2, 2))
	r.drv.inject(fakeFault{method: "vmmAlloc", code: cudaErrorOutOfMemory})
	small, want := makeSources(rng, 5000)
	_, err := r.c.Stage(context.Background(), 0, small, StageOptions{})
	asDriverError(t, err, "cuMemCreate", cudaErrorOutOfMemory)
	if de := driverErrors(err); de[0].Name != cudaErrorOutOfMemoryName {
		t.Errorf("Name = %q", de[0].Name)
	}
	if n := r.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d after the refusal", n)
	}
	r.verify(t, r.stage(t, 0, small), want)
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
			_, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
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
			l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
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
		_, err := r.c.Stage(ctx, 0, []Source{{Name: "slow", R: g, Len: int64(len(data))}}, StageOptions{})
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
	l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
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
	if _, err := r.c.Stage(ctx, 0, srcs, StageOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stage error %v", err)
	}
	r.expectAllocs(t, 0)
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
