//go:build cuda && cgo && linux

package gpu

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/testutil"
)

// TestReleaseIdempotent: see releaseFreesOnce.
func TestReleaseIdempotent(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	releaseFreesOnce(t, h.c, h)
}

// TestReleaseDuringReadBack: see releaseRacingReadBack.
func TestReleaseDuringReadBack(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	releaseRacingReadBack(t, h.c, h)
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
	testutil.Eventually(t, 10*time.Second, "the lease to expire", func() bool {
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

// TestCloseFreesAll: see closeFreesEverything; before Close, the fake
// holds the three leases, and a pool, streams, events and a context per
// device.
func TestCloseFreesAll(t *testing.T) {
	opts := smallOpts()
	h := newHarness(t, opts, func(fc *fakeControl) { fc.configure(2, 1<<30) })
	h.needFake(t) // uses two devices
	closeFreesEverything(t, h.c, h, func(t *testing.T) {
		h.expectLive(t, map[string]int64{"alloc": 3, "phys": 3, "resv": 3, "host": 2 * int64(opts.PinnedBuffers),
			"stream": 2 * int64(opts.Streams), "event": 2 * int64(opts.PinnedBuffers), "ctx": 2})
	})
}

// TestCloseAbortsStage: see closeAbortsBlockedStage.
func TestCloseAbortsStage(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	closeAbortsBlockedStage(t, h.c, h)
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
