package gpu

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
)

// Scenarios that run twice: on the Go fake, from the untagged tests (a
// rig), and on the C fake through cgo or, where HUBPROXY_TEST_CUDA_DRIVER
// names one, a real driver, from the cuda-tagged tests (a harness). Each
// scenario is written once, here, so that the two runs cannot drift apart.
// A scenario checks what the copier's API shows itself, and asks a
// driverView for the rest; a test keeps only what one driver can show and
// the other cannot.

// driverView is what a scenario sees of the driver beneath a copier. Calls
// are named as the Go fake's methods are (attach, hostAlloc, copyToHost...);
// the harness maps them to the CUDA entry points behind them (cudaCall).
// On a real driver the harness has no books to check, so its expectations
// pass, count returns 0 and pinned says it does not know.
type driverView interface {
	// stage stages srcs on dev with the default handover, failing the
	// test on an error.
	stage(t *testing.T, dev int, srcs []Source) *Lease
	// leased returns the device's LeasedBytes.
	leased(t *testing.T, dev int) int64
	// verify checks a lease's bytes (see verifyImage) at the copier's
	// alignment and reads it through its handover as a consumer would.
	verify(t *testing.T, l *Lease, want [][]byte)
	// expectClean fails the test if device memory is allocated or the
	// driver saw misuse.
	expectClean(t *testing.T)
	// expectNoLeaks fails the test if anything at all is left (device or
	// pinned memory, contexts, streams...): what Close must leave.
	expectNoLeaks(t *testing.T)
	// expectAllocs and expectFrees count device allocations and frees of
	// either kind, VMM and legacy.
	expectAllocs(t *testing.T, want int)
	expectFrees(t *testing.T, want int)
	// expectCount fails the test unless method was called want times.
	expectCount(t *testing.T, method string, want int)
	// count returns how many times method was called.
	count(method string) int
	// pinned returns the pinned host buffers live, and whether the driver
	// can tell.
	pinned() (n int, known bool)
}

// openFunc opens a fresh copier for a subtest, with the view of its driver.
type openFunc func(t *testing.T) (*Copier, driverView)

// startBlockedStage stages data, as one source, from a goroutine, and
// returns once its reader has blocked at blockAt: the reader, to open, and
// the channel the staging's error comes on. The test's cleanup opens the
// reader too, before the copier's Close (registered earlier) waits for it,
// so that a failing test never leaves a reader, and Close, hanging.
func startBlockedStage(t *testing.T, ctx context.Context, c *Copier, data []byte, blockAt int64) (*gatedReader, <-chan error) {
	t.Helper()
	g := newGatedReader(data, blockAt)
	t.Cleanup(g.open)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Stage(ctx, 0, []Source{{Name: "slow", R: g, Len: int64(len(data))}}, StageOptions{})
		errc <- err
	}()
	await(t, g.entered, "the reader to block")
	return g, errc
}

// releaseFreesOnce: the first Release frees the allocation and returns its
// bytes; every later Release of it, and of an id never issued, gets
// ErrUnknownLease and frees nothing; the lease is gone for every call.
func releaseFreesOnce(t *testing.T, c *Copier, d driverView) {
	srcs, _ := makeSources(rand.New(rand.NewPCG(1, 1)), 5000)
	l := d.stage(t, 0, srcs)
	if ls := c.Leases(); len(ls) != 1 || ls[0].ID != l.ID {
		t.Fatalf("Leases = %+v", ls)
	}
	if err := c.Release(l.ID); err != nil {
		t.Fatalf("first Release: %v", err)
	}
	d.expectClean(t)
	for _, id := range []string{l.ID, "no-such-lease"} {
		if err := c.Release(id); !errors.Is(err, ErrUnknownLease) {
			t.Errorf("Release(%q): %v, want ErrUnknownLease", id, err)
		}
	}
	d.expectFrees(t, 1)
	if err := c.ReadBack(context.Background(), l.ID, 0, make([]byte, 1)); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("ReadBack after Release: %v", err)
	}
	if _, err := c.Renew(l.ID); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("Renew after Release: %v", err)
	}
	if ls := c.Leases(); len(ls) != 0 {
		t.Errorf("Leases after Release = %+v", ls)
	}
	if n := d.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d", n)
	}
}

// releaseRacingReadBack releases a lease while readers copy from it: each
// read completes with the lease's bytes or reports ErrUnknownLease, never a
// driver error from touching freed memory, and the memory is freed once.
func releaseRacingReadBack(t *testing.T, c *Copier, d driverView) {
	srcs, want := makeSources(rand.New(rand.NewPCG(2, 2)), 64<<10)
	l := d.stage(t, 0, srcs)
	// The allocation is the one placement and zeros up to its rounded end
	// (a whole granule on the C fake and a GPU).
	p := l.Placements[0]
	started := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			buf := make([]byte, l.Bytes)
			for i := 0; ; i++ {
				err := c.ReadBack(context.Background(), l.ID, 0, buf)
				if i == 0 {
					started <- struct{}{}
				}
				if errors.Is(err, ErrUnknownLease) {
					return
				}
				if err != nil {
					t.Errorf("ReadBack: %v", err)
					return
				}
				end := p.Offset + p.Len
				if !bytes.Equal(buf[p.Offset:end], want[0]) || !isZero(buf[:p.Offset]) || !isZero(buf[end:]) {
					t.Errorf("ReadBack returned other bytes")
					return
				}
			}
		})
	}
	for range 4 {
		await(t, started, "a reader's first ReadBack")
	}
	if err := c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	d.expectFrees(t, 1)
	d.expectClean(t)
}

// closeFreesEverything stages three leases over two devices, checks with
// live what the driver holds then, and closes: Close frees every lease,
// the pinned pools and the devices' contexts, and the copier is closed.
func closeFreesEverything(t *testing.T, c *Copier, d driverView, live func(t *testing.T)) {
	rng := rand.New(rand.NewPCG(6, 6))
	for i := range 3 {
		srcs, _ := makeSources(rng, 10000, 10)
		d.stage(t, i%2, srcs)
	}
	live(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	d.expectNoLeaks(t)
	srcs, _ := makeSources(rng, 10)
	if _, err := c.Stage(context.Background(), 0, srcs, StageOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Stage after Close: %v", err)
	}
	if _, err := c.Devices(); !errors.Is(err, ErrClosed) {
		t.Errorf("Devices after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// closeAbortsBlockedStage closes the copier while a staging is blocked in
// a reader: Stage fails with ErrClosed without waiting for the reader,
// having freed its allocation; Close waits for the reader to give its
// pinned buffer back, and then returns with everything freed.
func closeAbortsBlockedStage(t *testing.T, c *Copier, d driverView) {
	data := make([]byte, 30000)
	g, errc := startBlockedStage(t, context.Background(), c, data, 10000)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	if err := await(t, errc, "Stage to fail"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Stage error %v, want ErrClosed", err)
	}
	d.expectClean(t) // the allocation is freed while the reader still blocks
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a reader still held a pinned buffer", err)
	default:
	}
	if n, known := d.pinned(); known && n == 0 {
		t.Fatal("the pinned pool was freed while a reader still held a buffer")
	}
	g.open()
	if err := await(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	d.expectNoLeaks(t)
}

// stageRoundTrip stages tensors of awkward sizes and counts, on a copier
// with smallOpts: every byte lands at its placement and gaps are zero, one
// allocation per lease, and the pool is pinned once.
func stageRoundTrip(t *testing.T, c *Copier, d driverView) {
	pool := int64(c.opts.PinnedBuffers) * c.opts.BufferSize
	rng := rand.New(rand.NewPCG(1, 2))
	many := make([]int64, 300)
	for i := range many {
		many[i] = rng.Int64N(300) // includes empty tensors
	}
	cases := []struct {
		name  string
		sizes []int64
	}{
		{"one byte", []int64{1}},
		{"buffer edges", []int64{4095, 4096, 4097, 1, 8191, 12289}},
		{"odd sizes", []int64{10000, 123457, 3, 77777}},
		{"many small packed", many},
		{"larger than the pool", []int64{5*pool + 17}},
		{"empty between", []int64{0, 100, 0, 0, 5000, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srcs, want := makeSources(rng, tc.sizes...)
			l := d.stage(t, 0, srcs)
			d.verify(t, l, want)
			if err := c.Release(l.ID); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	}
	d.expectAllocs(t, len(cases))
	d.expectCount(t, "hostAlloc", c.opts.PinnedBuffers)
	d.expectClean(t)
}

// sharedPoolOpts makes a pool smaller than stageConcurrently's demand.
func sharedPoolOpts() Options {
	return Options{PinnedBuffers: 2, BufferSize: 1024, Streams: 2, Alignment: 64}
}

// stageConcurrently runs stagings from several goroutines over a copier
// with sharedPoolOpts: a buffer reused before its copy ran, or a piece
// landing in another lease, shows up as wrong bytes (and, for reuse, as a
// race on the Go fake). The pool is pinned once all the same.
func stageConcurrently(t *testing.T, c *Copier, d driverView) {
	const workers, rounds = 6, 3
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				sizes := make([]int64, 1+rng.IntN(5))
				for i := range sizes {
					sizes[i] = 1 + rng.Int64N(6000)
				}
				srcs, want := makeSources(rng, sizes...)
				l, err := c.Stage(context.Background(), 0, srcs, StageOptions{})
				if err != nil {
					t.Errorf("worker %d: Stage: %v", w, err)
					return
				}
				d.verify(t, l, want)
				if err := c.Release(l.ID); err != nil {
					t.Errorf("worker %d: Release: %v", w, err)
				}
			}
		})
	}
	wg.Wait()
	d.expectCount(t, "hostAlloc", c.opts.PinnedBuffers)
	d.expectAllocs(t, workers*rounds)
	d.expectClean(t)
}

// poolPinnedOnce stages eight leases, taking devices 0 to devices-1 in
// turn, and runs a Bench: each device is attached once and its pool pinned
// once.
func poolPinnedOnce(t *testing.T, c *Copier, d driverView, devices int) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 8 {
		srcs, want := makeSources(rng, int64(i)*5000+1, 300)
		d.verify(t, d.stage(t, i%devices, srcs), want)
	}
	if _, err := c.Bench(context.Background(), 0, 50000); err != nil {
		t.Fatal(err)
	}
	d.expectCount(t, "hostAlloc", devices*c.opts.PinnedBuffers) // a pool per device
	d.expectCount(t, "attach", devices)
}

// badRequests: invalid sources, devices and read-back ranges, on a copier
// with one device, are refused with ErrBadRequest or ErrBadDevice before
// touching the driver.
func badRequests(t *testing.T, c *Copier, d driverView) {
	ctx := context.Background()
	srcs, _ := makeSources(rand.New(rand.NewPCG(7, 7)), 10)
	for name, s := range map[string][]Source{
		"no sources":   nil,
		"nil reader":   {{Name: "x", Len: 1}},
		"negative len": {{Name: "x", R: srcs[0].R, Len: -1}},
		"negative off": {{Name: "x", R: srcs[0].R, Off: -1, Len: 1}},
		"all empty":    {{Name: "x", R: srcs[0].R}},
	} {
		if _, err := c.Stage(ctx, 0, s, StageOptions{}); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", name, err)
		}
	}
	for _, dev := range []int{-1, 1} {
		if _, err := c.Stage(ctx, dev, srcs, StageOptions{}); !errors.Is(err, ErrBadDevice) {
			t.Errorf("device %d: %v, want ErrBadDevice", dev, err)
		}
	}
	d.expectCount(t, "attach", 0)
	l := d.stage(t, 0, srcs)
	reads := d.count("copyToHost")
	b := l.Bytes // the allocation, rounded up to the granularity: all of it reads back
	for _, rg := range []struct{ off, n int64 }{{-1, 1}, {0, b + 1}, {b, 1}, {b + 1, 0}} {
		if err := c.ReadBack(ctx, l.ID, rg.off, make([]byte, rg.n)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ReadBack(%d, %d bytes): %v, want ErrBadRequest", rg.off, rg.n, err)
		}
	}
	d.expectCount(t, "copyToHost", reads)
	if _, err := c.Bench(ctx, 0, 0); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Bench(0 bytes): %v", err)
	}
	if _, err := c.ExportFD("no-such-lease"); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("ExportFD of an unknown lease: %v", err)
	}
}

// failedStageCleansUp stages on a copier whose driver is set to fail call
// with CUDA_ERROR_UNKNOWN, a failure that leaves the context usable: the
// error names the call, nothing stays allocated, reserved or counted, the
// pool is whole or gone (never partial), and the next Stage works.
func failedStageCleansUp(t *testing.T, c *Copier, d driverView, call string) {
	rng := rand.New(rand.NewPCG(1, 1))
	srcs, _ := makeSources(rng, 30000, 100, 9000)
	_, err := c.Stage(context.Background(), 0, srcs, StageOptions{})
	asDriverError(t, err, call, cudaErrorUnknown)
	d.expectClean(t)
	if n := d.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d after a failed Stage", n)
	}
	if n, known := d.pinned(); known && n != 0 && n != c.opts.PinnedBuffers {
		t.Errorf("%d pinned buffers live: a partial pool", n)
	}
	srcs, want := makeSources(rng, 30000, 100, 9000)
	d.verify(t, d.stage(t, 0, srcs), want)
}

// outOfDeviceMemory stages on a copier whose driver refuses its first
// cuMemCreate with CUDA_ERROR_OUT_OF_MEMORY although the budget admitted
// the staging (its free figure raced another process): the failure
// surfaces as CUDA's, nothing stays allocated or reserved, and the copier
// stays usable.
func outOfDeviceMemory(t *testing.T, c *Copier, d driverView) {
	srcs, want := makeSources(rand.New(rand.NewPCG(2, 2)), 5000)
	_, err := c.Stage(context.Background(), 0, srcs, StageOptions{})
	asDriverError(t, err, "cuMemCreate", cudaErrorOutOfMemory)
	if de := driverErrors(err); de[0].Name != cudaErrorOutOfMemoryName {
		t.Errorf("Name = %q", de[0].Name)
	}
	if !errors.Is(err, ErrOutOfMemory) || errors.Is(err, ErrBudget) {
		t.Errorf("%v: want ErrOutOfMemory (the driver's refusal), not ErrBudget", err)
	}
	d.expectClean(t)
	if n := d.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d after the refusal", n)
	}
	d.verify(t, d.stage(t, 0, srcs), want)
}

// readerErrorsCleanUp: a source that fails or comes up short in the middle
// of a lease, after good pieces, fails the staging with a *SourceError
// naming it, frees everything, and the pool is neither leaked nor pinned
// again. Each case opens its own copier, to count the pool's pinning.
func readerErrorsCleanUp(t *testing.T, open openFunc) {
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
			c, d := open(t)
			rng := rand.New(rand.NewPCG(3, 3))
			srcs, _ := makeSources(rng, 20000, 20000)
			data := make([]byte, 50000)
			srcs = append(srcs, Source{Name: "bad", R: &failingReader{data: data, failAt: 30000, err: tc.err}, Off: 1000, Len: 40000})
			_, err := c.Stage(context.Background(), 0, srcs, StageOptions{})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Stage error %v, want %v", err, tc.wantErr)
			}
			var se *SourceError
			if !errors.As(err, &se) || se.Name != "bad" {
				t.Fatalf("error %v is not a *SourceError for \"bad\"", err)
			}
			d.expectClean(t)
			if n := d.leased(t, 0); n != 0 {
				t.Errorf("LeasedBytes = %d", n)
			}
			srcs, want := makeSources(rng, 20000)
			d.verify(t, d.stage(t, 0, srcs), want)
			d.expectCount(t, "hostAlloc", c.opts.PinnedBuffers)
		})
	}
}

// cancelCleansUp cancels a staging while one of its reads is blocked:
// Stage returns without waiting for the reader and has freed the device
// memory; the blocked piece keeps its pinned buffer until the reader
// returns, and the copier keeps working meanwhile.
func cancelCleansUp(t *testing.T, c *Copier, d driverView) {
	rng := rand.New(rand.NewPCG(4, 4))
	data := make([]byte, 40000)
	fillRandom(rng, data)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, errc := startBlockedStage(t, ctx, c, data, 20000)
	cancel()
	if err := await(t, errc, "Stage"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stage error %v, want context.Canceled", err)
	}
	d.expectClean(t) // the reader is still blocked here
	if n := d.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d", n)
	}
	srcs, want := makeSources(rng, 30000)
	l, err := c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatalf("Stage while a cancelled reader is blocked: %v", err)
	}
	d.verify(t, l, want)
	g.open()
	// The test's cleanup Closes the copier, which waits for the orphaned
	// piece; the fakes then check that its buffer was freed with the rest.
}

// cancelledBeforeAllocating: a context already done stops a staging
// before it allocates.
func cancelledBeforeAllocating(t *testing.T, c *Copier, d driverView) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srcs, _ := makeSources(rand.New(rand.NewPCG(5, 5)), 100)
	if _, err := c.Stage(ctx, 0, srcs, StageOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stage error %v", err)
	}
	d.expectAllocs(t, 0)
}
