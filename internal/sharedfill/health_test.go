package sharedfill

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// useClock makes s's store breaker read a clock the test moves, so tests
// let its pauses pass without sleeping. Call it before s is used.
func useClock(s *Sharer) *testutil.Clock {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	s.health = newHealth(clk.Now)
	return clk
}

// The store's breaker: any failure opens it for minPause, doubling up to
// maxPause while failures continue; a cancelled call says nothing; an
// answer (found, not found, exists) closes it; after a pause one read
// probes, holding the others back for as long as a store call may take.
func TestHealthPausesDoubleAndOneReadProbes(t *testing.T) {
	s := newSharer(t, fileStore(t), nil, Options{OpTimeout: 5 * time.Second})
	clk := useClock(s)
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	s.observe(cancelled, context.Canceled)
	if !s.Health().Up {
		t.Fatal("a call its caller cancelled opened the breaker")
	}
	down := errors.New("connection refused")
	s.observe(ctx, down)
	h := s.Health()
	if h.Up || h.Reason != down.Error() || !h.Since.Equal(clk.Now()) || s.usable() || s.tryStore() {
		t.Fatalf("after a failure: %+v, usable %v", h, s.usable())
	}
	for _, pause := range []time.Duration{minPause, 2 * minPause, 4 * minPause} {
		clk.Advance(pause - time.Millisecond)
		if s.usable() {
			t.Fatalf("usable before its %v pause ended", pause)
		}
		clk.Advance(time.Millisecond)
		if !s.usable() || !s.tryStore() {
			t.Fatalf("not usable after its %v pause", pause)
		}
		if s.tryStore() {
			t.Fatal("a second read probed the store")
		}
		clk.Advance(s.opts.OpTimeout - time.Millisecond)
		if s.tryStore() {
			t.Fatal("another read probed before the first probe could have ended")
		}
		s.observe(ctx, down) // the probe failed
	}
	for range 5 { // 16s, 32s: capped
		s.observe(ctx, down)
	}
	if clk.Advance(maxPause - time.Millisecond); s.usable() {
		t.Fatal("a pause at the cap ended early")
	}
	if clk.Advance(time.Millisecond); !s.usable() {
		t.Fatal("the pause grew past maxPause")
	}
	s.observe(ctx, sharedstore.ErrNotFound)
	if h := s.Health(); !h.Up || !s.usable() || !s.tryStore() {
		t.Fatalf("an answer did not close the breaker: %+v", h)
	}
	s.observe(ctx, down)
	if clk.Advance(minPause); !s.usable() {
		t.Fatal("the next outage did not start from minPause")
	}
}
