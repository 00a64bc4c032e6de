//go:build cuda && cgo && linux

package gpu

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestReleaseIdempotent(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	srcs, _ := makeSources(rand.New(rand.NewPCG(1, 1)), 5000)
	l, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ls := h.c.Leases(); len(ls) != 1 || ls[0].ID != l.ID {
		t.Fatalf("Leases = %+v", ls)
	}
	if err := h.c.Release(l.ID); err != nil {
		t.Fatalf("first Release: %v", err)
	}
	h.expectLive(t, map[string]int64{"alloc": 0})
	for _, id := range []string{l.ID, "no-such-lease"} {
		if err := h.c.Release(id); !errors.Is(err, ErrUnknownLease) {
			t.Errorf("Release(%q): %v, want ErrUnknownLease", id, err)
		}
	}
	h.expectCalls(t, "cuMemRelease", 1)
	if err := h.c.ReadBack(context.Background(), l.ID, 0, make([]byte, 1)); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("ReadBack after Release: %v", err)
	}
	if _, err := h.c.Renew(l.ID); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("Renew after Release: %v", err)
	}
	if ls := h.c.Leases(); len(ls) != 0 {
		t.Errorf("Leases after Release = %+v", ls)
	}
	if n := h.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d", n)
	}
}

// TestReleaseDuringReadBack releases a lease while readers copy from it:
// each read either completes or reports ErrUnknownLease, never a driver
// error from touching freed memory.
func TestReleaseDuringReadBack(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	srcs, _ := makeSources(rand.New(rand.NewPCG(2, 2)), 64<<10)
	l, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			buf := make([]byte, l.Bytes)
			for i := 0; ; i++ {
				err := h.c.ReadBack(context.Background(), l.ID, 0, buf)
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
			}
		})
	}
	for range 4 {
		<-started
	}
	if err := h.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	h.expectCalls(t, "cuMemRelease", 1)
}

func TestLeaseExpires(t *testing.T) {
	opts := smallOpts()
	opts.LeaseTTL = 30 * time.Millisecond
	h := newHarness(t, opts, nil)
	start := time.Now()
	srcs, _ := makeSources(rand.New(rand.NewPCG(3, 3)), 5000)
	l, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Expires.Before(start.Add(opts.LeaseTTL)) {
		t.Errorf("Expires %v is less than the TTL after the start %v", l.Expires, start)
	}
	eventually(t, "the lease to expire", func() bool {
		return len(h.c.Leases()) == 0 && h.leased(t, 0) == 0
	})
	h.expectLive(t, map[string]int64{"alloc": 0})
	if err := h.c.Release(l.ID); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("Release after expiry: %v", err)
	}
	h.expectCalls(t, "cuMemRelease", 1)
}

func TestRenew(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	srcs, _ := makeSources(rand.New(rand.NewPCG(4, 4)), 5000)
	l, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.c.Renew(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != l.ID || r.Expires.Before(l.Expires) {
		t.Errorf("Renew = %+v, was %+v", r, l)
	}
}

func TestCloseFreesAll(t *testing.T) {
	opts := smallOpts()
	h := newHarness(t, opts, func(fc *fakeControl) { fc.configure(2, 1<<30) })
	h.needFake(t) // uses two devices
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range 3 {
		srcs, _ := makeSources(rng, 10000, 10)
		if _, err := h.c.Stage(context.Background(), i%2, srcs, StageOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.expectLive(t, map[string]int64{"alloc": 3, "phys": 3, "resv": 3, "host": 2 * int64(opts.PinnedBuffers),
		"stream": 2 * int64(opts.Streams), "event": 2 * int64(opts.PinnedBuffers), "ctx": 2})
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	h.expectLive(t, map[string]int64{"alloc": 0, "phys": 0, "host": 0, "stream": 0, "event": 0, "ctx": 0, "violations": 0})
	srcs, _ := makeSources(rng, 10)
	if _, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Stage after Close: %v", err)
	}
	if _, err := h.c.Devices(); !errors.Is(err, ErrClosed) {
		t.Errorf("Devices after Close: %v", err)
	}
	if err := h.c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCloseAbortsStage closes the copier while a staging is blocked in a
// reader: Stage fails with ErrClosed without waiting for the reader, and
// Close returns, everything freed, once the reader does.
func TestCloseAbortsStage(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	data := make([]byte, 30000)
	g := newGatedReader(data, 10000)
	errc := make(chan error, 1)
	go func() {
		_, err := h.c.Stage(context.Background(), 0, []Source{{Name: "slow", R: g, Len: int64(len(data))}}, StageOptions{})
		errc <- err
	}()
	<-g.entered
	closed := make(chan error, 1)
	go func() { closed <- h.c.Close() }()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("Stage error %v, want ErrClosed", err)
	}
	h.expectLive(t, map[string]int64{"alloc": 0})
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a reader still held a pinned buffer", err)
	default:
	}
	close(g.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	h.expectLive(t, map[string]int64{"host": 0, "violations": 0})
}

func TestBench(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	r, err := h.c.Bench(context.Background(), 0, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	if r.Device != 0 || r.Bytes != 100_000 || r.Pinned <= 0 || r.Pageable <= 0 ||
		r.PinnedGBps <= 0 || r.PageableGBps <= 0 || r.Speedup() <= 0 {
		t.Errorf("Bench = %+v", r)
	}
	h.expectLive(t, map[string]int64{"alloc": 0})
	h.expectCalls(t, "pageable_async", 0)
	if h.fc != nil && h.fc.calls("cuMemcpyHtoD_v2") < 1 {
		t.Error("the pageable path made no cuMemcpyHtoD_v2 call")
	}
	if n := h.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d after Bench", n)
	}
}
