package gpu

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// driverErrors returns every *DriverError in err's tree.
func driverErrors(err error) []*DriverError {
	var out []*DriverError
	var walk func(error)
	walk = func(err error) {
		if de, ok := err.(*DriverError); ok {
			out = append(out, de)
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			if e := u.Unwrap(); e != nil {
				walk(e)
			}
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// hasCall reports whether err carries a *DriverError for call.
func hasCall(err error, call string) bool {
	for _, de := range driverErrors(err) {
		if de.Call == call {
			return true
		}
	}
	return false
}

// onlyCode fails the test unless err carries driver errors, all with code.
func onlyCode(t *testing.T, what string, err error, code int) {
	t.Helper()
	des := driverErrors(err)
	if len(des) == 0 {
		t.Errorf("%s: %v, want driver errors", what, err)
	}
	for _, de := range des {
		if de.Code != code {
			t.Errorf("%s: %s failed with %d, want %d", what, de.Call, de.Code, code)
		}
	}
}

// TestPumpRefillsBufferOnlyAfterItsCopy holds the first waited-for copy
// in its wait while the rest of a long pump runs on the other buffers: a
// buffer handed back before its copy's event completed would be refilled
// while the fake still has that copy queued, which every fill checks for.
// Each buffer has its own stream, so no other wait runs the held copy.
func TestPumpRefillsBufferOnlyAfterItsCopy(t *testing.T) {
	opts := Options{PinnedBuffers: 3, BufferSize: 1024, Streams: 3, Alignment: 256}
	r := newRig(t, opts, fakeConfig{})
	const total = 40*1024 + 100
	pieces := int((total + opts.BufferSize - 1) / opts.BufferSize)
	d, done, err := r.c.use(0)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	dptr, err := r.drv.alloc(0, total)
	if err != nil {
		t.Fatal(err)
	}
	defer r.drv.free(0, dptr) // before the cleanup's Close

	release := newLatch()
	defer release.open()
	r.drv.hook("wait", holdFirst(make(chan struct{}), release.ch))
	var filled atomic.Int64
	fill := func(_ context.Context, dst []byte, off int64) error {
		if n := r.drv.queuedFrom(dst); n != 0 {
			release.open()
			return fmt.Errorf("buffer refilled for offset %d with %d copies from it still queued", off, n)
		}
		for i := range dst {
			dst[i] = byte((off + int64(i)) * 7 / 5)
		}
		if filled.Add(1) == int64(pieces) {
			release.open() // every other piece is through: let the held one finish
		}
		return nil
	}
	settled, err := r.c.pump(context.Background(), d, dptr, total, fill)
	if err != nil || !settled {
		t.Fatalf("pump: settled %v, %v", settled, err)
	}
	if n := r.drv.live().queued; n != 0 {
		t.Errorf("%d copies still queued after pump returned", n)
	}
	got := make([]byte, total)
	if err := r.drv.copyToHost(0, got, dptr); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if want := byte(int64(i) * 7 / 5); got[i] != want {
			t.Fatalf("device byte %d = %d, want %d", i, got[i], want)
		}
	}
	for _, m := range []string{"copyAsync", "record", "wait"} {
		r.expectCount(t, m, pieces)
	}
	r.expectCount(t, "syncStream", 0)
}

// TestPumpCancelWaitsForIssuedCopies cancels a staging while one of its
// copies is queued and its holder is inside wait: Stage must not return,
// nor free the allocation, until that copy is done. synctest.Wait lets the
// test see the moment when nothing else can happen.
func TestPumpCancelWaitsForIssuedCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, smallOpts(), fakeConfig{})
		entered, release := make(chan struct{}), newLatch()
		defer release.open()
		r.drv.hook("wait", holdFirst(entered, release.ch))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srcs, _ := makeSources(rand.New(rand.NewPCG(1, 1)), 30000)
		errc := make(chan error, 1)
		go func() {
			_, err := r.c.Stage(ctx, 0, srcs, StageOptions{})
			errc <- err
		}()
		<-entered
		cancel()
		synctest.Wait()
		select {
		case err := <-errc:
			t.Fatalf("Stage returned (%v) while a copy into its allocation was queued", err)
		default:
		}
		if r.drv.count("vmmFree") != 0 {
			t.Fatal("the allocation was freed while a copy into it was queued")
		}
		release.open()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Stage: %v, want context.Canceled", err)
		}
		r.expectClean(t)
	})
}

// TestPumpDrainFailureStrandsInsteadOfFreeing: a copy's wait fails and so
// does the stream drain meant to confirm it finished. Both failures are
// reported; the allocation, which the copy may still write, is neither
// freed nor returned to the budget; the buffer, which it may still read,
// is retired and replaced; and Close frees both once it has drained the
// stream. Before, the drain's error was discarded, the allocation freed
// under the queued copy, and the buffer refilled under it.
func TestPumpDrainFailureStrandsInsteadOfFreeing(t *testing.T) {
	opts := smallOpts()
	opts.Streams = opts.PinnedBuffers // no other piece's wait runs the stranded copy
	r := newRig(t, opts, fakeConfig{})
	rng := rand.New(rand.NewPCG(2, 2))
	r.drv.inject(fakeFault{method: "wait", after: 1, code: cudaErrorUnknown})
	r.drv.inject(fakeFault{method: "syncStream", code: cudaErrorUnknown})
	srcs, _ := makeSources(rng, 30000)
	_, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if !hasCall(err, "cuEventSynchronize") || !hasCall(err, "cuStreamSynchronize") {
		t.Fatalf("Stage: %v, want both the wait and the drain failure", err)
	}
	for _, m := range r.drv.misused() {
		t.Errorf("fake driver: misuse: %s", m)
	}
	if l := r.drv.live(); l.allocs != 1 || l.queued != 1 {
		t.Errorf("fake holds %+v, want the allocation and its queued copy", l)
	}
	if n, want := r.leased(t, 0), roundUp(30000, r.drv.cfg.granularity); n != want {
		t.Errorf("LeasedBytes = %d, want %d (the stranded allocation)", n, want)
	}

	srcs, want := makeSources(rng, 20000)
	l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatalf("Stage after the failure: %v", err)
	}
	r.verify(t, l, want)
	r.expectCount(t, "hostAlloc", opts.PinnedBuffers+1) // the retired buffer was replaced
	if err := r.c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestPoolRetiredBuffersFailFast: when the last buffer in service is
// retired, a staging waiting for a buffer fails at once instead of
// waiting forever, and the next staging replaces the buffer and works.
func TestPoolRetiredBuffersFailFast(t *testing.T) {
	opts := smallOpts()
	opts.PinnedBuffers = 1
	r := newRig(t, opts, fakeConfig{})
	rng := rand.New(rand.NewPCG(3, 3))

	// A holds the only buffer, blocked in its reader.
	g, errA := startBlockedStage(t, context.Background(), r.c, make([]byte, 10000), 0)

	// B gets past the pool's top-up (its alloc comes after) and then has
	// to wait for A's buffer. Its context never ends.
	allocB := make(chan struct{})
	var once sync.Once
	r.drv.hook("vmmAlloc", func(int) { once.Do(func() { close(allocB) }) })
	errB := make(chan error, 1)
	go func() {
		srcs, _ := makeSources(rand.New(rand.NewPCG(4, 4)), 5000)
		_, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
		errB <- err
	}()
	await(t, allocB, "B's alloc")

	r.drv.inject(fakeFault{method: "wait", code: cudaErrorUnknown})
	r.drv.inject(fakeFault{method: "syncStream", code: cudaErrorUnknown})
	g.open()
	if err := await(t, errA, "A"); !hasCall(err, "cuStreamSynchronize") {
		t.Fatalf("A: %v, want the drain failure", err)
	}
	if err := await(t, errB, "B"); !errors.Is(err, errPoolRetired) {
		t.Fatalf("B: %v, want errPoolRetired", err)
	}
	srcs, want := makeSources(rng, 5000)
	l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatalf("Stage after the pool was replenished: %v", err)
	}
	r.verify(t, l, want)
}
