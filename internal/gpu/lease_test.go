package gpu

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestReleaseFreesOnce: see releaseFreesOnce.
func TestReleaseFreesOnce(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	releaseFreesOnce(t, r.c, r)
}

// TestReleaseRacingReadBack: see releaseRacingReadBack. The fake also
// fails the test on any read of freed memory.
func TestReleaseRacingReadBack(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	releaseRacingReadBack(t, r.c, r)
}

// newTTLRig returns a rig whose leases live for the TTL it returns, ten
// minutes, for the tests that move the fake clock across it.
func newTTLRig(t *testing.T) (*rig, time.Duration) {
	t.Helper()
	opts := smallOpts()
	opts.LeaseTTL = 10 * time.Minute
	return newRig(t, opts, fakeConfig{}), opts.LeaseTTL
}

// TestReaperFreesLeaseAtTTL moves the clock, rather than sleeping, across
// a lease's TTL: the lease lives until the instant it expires, is gone
// from that instant, and the reaper frees it and returns its bytes.
func TestReaperFreesLeaseAtTTL(t *testing.T) {
	r, ttl := newTTLRig(t)
	start := r.clk.now()
	srcs, _ := makeSources(rand.New(rand.NewPCG(3, 3)), 5000)
	l := r.stage(t, 0, srcs)
	if want := start.Add(ttl); !l.Expires.Equal(want) {
		t.Fatalf("Expires = %v, want %v", l.Expires, want)
	}
	r.clk.awaitAlarm(t, l.Expires)

	r.clk.advance(ttl - time.Nanosecond)
	if ls := r.c.Leases(); len(ls) != 1 || r.drv.live().allocs != 1 {
		t.Fatalf("a nanosecond before expiry: leases %+v, fake %+v", ls, r.drv.live())
	}
	r.clk.advance(time.Nanosecond)
	if ls := r.c.Leases(); len(ls) != 0 {
		t.Errorf("Leases at expiry = %+v", ls)
	}
	r.clk.awaitAlarm(t, time.Time{}) // reaped, and nothing left to wait for
	if n := r.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d after expiry", n)
	}
	r.expectClean(t)
	r.expectFrees(t, 1)
	if err := r.c.Release(l.ID); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("Release after expiry: %v", err)
	}
	r.expectFrees(t, 1)
}

// TestRenewPostponesExpiry: Renew restarts the TTL from now, and the
// reaper, woken at the old expiry, leaves the lease alone until the new one.
func TestRenewPostponesExpiry(t *testing.T) {
	r, ttl := newTTLRig(t)
	srcs, _ := makeSources(rand.New(rand.NewPCG(4, 4)), 5000)
	l := r.stage(t, 0, srcs)
	r.clk.awaitAlarm(t, l.Expires)
	r.clk.advance(ttl / 2)
	renewed, err := r.c.Renew(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := r.clk.now().Add(ttl); renewed.ID != l.ID || !renewed.Expires.Equal(want) {
		t.Fatalf("Renew = %+v, want Expires %v", renewed, want)
	}
	r.clk.advance(ttl / 2) // the old expiry: the reaper wakes
	r.clk.awaitAlarm(t, renewed.Expires)
	if ls := r.c.Leases(); len(ls) != 1 || !ls[0].Expires.Equal(renewed.Expires) {
		t.Fatalf("after the old expiry: Leases = %+v", ls)
	}
	r.expectFrees(t, 0)
	r.clk.advance(ttl / 2)
	r.clk.awaitAlarm(t, time.Time{})
	r.expectFrees(t, 1)
	r.expectClean(t)
}

// TestExpiredLeaseIsGoneBeforeReaped: a lease past its expiry is unknown
// to Release, Renew and ReadBack, and missing from Leases, even while the
// reaper has yet to free it (here, because it is busy freeing another).
// Before, such a lease could be renewed back to life or released with a
// nil error, depending on when the reaper last ran.
func TestExpiredLeaseIsGoneBeforeReaped(t *testing.T) {
	r, ttl := newTTLRig(t)
	rng := rand.New(rand.NewPCG(5, 5))
	srcs, _ := makeSources(rng, 5000)
	first := r.stage(t, 0, srcs)
	r.clk.advance(time.Minute)
	second := r.stage(t, 0, srcs)
	r.clk.awaitAlarm(t, first.Expires)

	// Hold the reaper inside its free of the first lease.
	entered, release := make(chan struct{}), newLatch()
	defer release.open()
	r.drv.hook("vmmFree", holdFirst(entered, release.ch))
	r.clk.advance(ttl - time.Minute) // the first expires
	await(t, entered, "the reaper to free the first lease")
	r.clk.advance(time.Minute) // the second expires; the reaper is busy

	if err := r.c.ReadBack(context.Background(), second.ID, 0, make([]byte, 1)); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("ReadBack of an expired lease: %v, want ErrUnknownLease", err)
	}
	if l, err := r.c.Renew(second.ID); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("Renew of an expired lease: %+v, %v, want ErrUnknownLease", l, err)
	}
	if err := r.c.Release(second.ID); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("Release of an expired lease: %v, want ErrUnknownLease", err)
	}
	if ls := r.c.Leases(); len(ls) != 0 {
		t.Errorf("Leases lists expired leases: %+v", ls)
	}
	release.open()
	r.clk.awaitAlarm(t, time.Time{})
	r.expectFrees(t, 2)
	r.expectClean(t)
}

// TestCloseFreesEverything: see closeFreesEverything; before Close, the
// fake holds the three leases, a pool per device and both devices.
func TestCloseFreesEverything(t *testing.T) {
	opts := smallOpts()
	r := newRig(t, opts, fakeConfig{devices: 2})
	closeFreesEverything(t, r.c, r, func(t *testing.T) {
		if l := r.drv.live(); l.allocs != 3 || l.pinned != 2*opts.PinnedBuffers || l.attached != 2 {
			t.Fatalf("before Close: %+v", l)
		}
	})
}

// TestCloseAbortsBlockedStage: see closeAbortsBlockedStage.
func TestCloseAbortsBlockedStage(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	closeAbortsBlockedStage(t, r.c, r)
}
