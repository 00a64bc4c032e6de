package gpu

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestReleaseFreesOnce: the first Release frees the allocation and returns
// its bytes; every later Release of it, and of an id never issued, gets
// ErrUnknownLease and frees nothing; the lease is gone for every call.
func TestReleaseFreesOnce(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	srcs, _ := makeSources(rand.New(rand.NewPCG(1, 1)), 5000)
	l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ls := r.c.Leases(); len(ls) != 1 || ls[0].ID != l.ID {
		t.Fatalf("Leases = %+v", ls)
	}
	if err := r.c.Release(l.ID); err != nil {
		t.Fatalf("first Release: %v", err)
	}
	r.expectClean(t)
	for _, id := range []string{l.ID, "no-such-lease"} {
		if err := r.c.Release(id); !errors.Is(err, ErrUnknownLease) {
			t.Errorf("Release(%q): %v, want ErrUnknownLease", id, err)
		}
	}
	r.expectFrees(t, 1)
	if err := r.c.ReadBack(context.Background(), l.ID, 0, make([]byte, 1)); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("ReadBack after Release: %v", err)
	}
	if _, err := r.c.Renew(l.ID); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("Renew after Release: %v", err)
	}
	if ls := r.c.Leases(); len(ls) != 0 {
		t.Errorf("Leases after Release = %+v", ls)
	}
	if n := r.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d", n)
	}
}

// TestReleaseRacingReadBack releases a lease while readers copy from it:
// each read completes or reports ErrUnknownLease, the memory is freed
// once, and the fake never sees a read of freed memory.
func TestReleaseRacingReadBack(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	srcs, want := makeSources(rand.New(rand.NewPCG(2, 2)), 64<<10)
	l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			buf := make([]byte, l.Bytes)
			for i := 0; ; i++ {
				err := r.c.ReadBack(context.Background(), l.ID, 0, buf)
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
				if string(buf) != string(want[0]) {
					t.Errorf("ReadBack returned other bytes")
					return
				}
			}
		})
	}
	for range 4 {
		<-started
	}
	if err := r.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	r.expectFrees(t, 1)
	r.expectClean(t)
}

// TestReaperFreesLeaseAtTTL moves the clock, rather than sleeping, across
// a lease's TTL: the lease lives until the instant it expires, is gone
// from that instant, and the reaper frees it and returns its bytes.
func TestReaperFreesLeaseAtTTL(t *testing.T) {
	opts := smallOpts()
	opts.LeaseTTL = 10 * time.Minute
	r := newRig(t, opts, fakeConfig{})
	start := r.clk.now()
	srcs, _ := makeSources(rand.New(rand.NewPCG(3, 3)), 5000)
	l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := start.Add(opts.LeaseTTL); !l.Expires.Equal(want) {
		t.Fatalf("Expires = %v, want %v", l.Expires, want)
	}
	r.clk.awaitAlarm(t, l.Expires)

	r.clk.advance(opts.LeaseTTL - time.Nanosecond)
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
	opts := smallOpts()
	opts.LeaseTTL = 10 * time.Minute
	r := newRig(t, opts, fakeConfig{})
	srcs, _ := makeSources(rand.New(rand.NewPCG(4, 4)), 5000)
	l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.clk.awaitAlarm(t, l.Expires)
	r.clk.advance(opts.LeaseTTL / 2)
	renewed, err := r.c.Renew(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := r.clk.now().Add(opts.LeaseTTL); renewed.ID != l.ID || !renewed.Expires.Equal(want) {
		t.Fatalf("Renew = %+v, want Expires %v", renewed, want)
	}
	r.clk.advance(opts.LeaseTTL / 2) // the old expiry: the reaper wakes
	r.clk.awaitAlarm(t, renewed.Expires)
	if ls := r.c.Leases(); len(ls) != 1 || !ls[0].Expires.Equal(renewed.Expires) {
		t.Fatalf("after the old expiry: Leases = %+v", ls)
	}
	r.expectFrees(t, 0)
	r.clk.advance(opts.LeaseTTL / 2)
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
	opts := smallOpts()
	opts.LeaseTTL = 10 * time.Minute
	r := newRig(t, opts, fakeConfig{})
	rng := rand.New(rand.NewPCG(5, 5))
	srcs, _ := makeSources(rng, 5000)
	first, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.clk.advance(time.Minute)
	second, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.clk.awaitAlarm(t, first.Expires)

	// Hold the reaper inside its free of the first lease.
	entered, release := make(chan struct{}), newLatch()
	defer release.open()
	r.drv.hook("vmmFree", holdFirst(entered, release.ch))
	r.clk.advance(opts.LeaseTTL - time.Minute) // the first expires
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

// TestCloseFreesEverything: Close frees every lease, the pinned pool and
// every device it attached, on each device; the copier is then closed.
func TestCloseFreesEverything(t *testing.T) {
	opts := smallOpts()
	r := newRig(t, opts, fakeConfig{devices: 2})
	rng := rand.New(rand.NewPCG(6, 6))
	for i := range 3 {
		srcs, _ := makeSources(rng, 10000, 10)
		if _, err := r.c.Stage(context.Background(), i%2, srcs, StageOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if l := r.drv.live(); l.allocs != 3 || l.pinned != 2*opts.PinnedBuffers || l.attached != 2 {
		t.Fatalf("before Close: %+v", l)
	}
	if err := r.c.Close(); err != nil {
		t.Fatal(err)
	}
	if ls := r.drv.leaks(); len(ls) != 0 {
		t.Fatalf("after Close: %q", ls)
	}
	srcs, _ := makeSources(rng, 10)
	if _, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Stage after Close: %v", err)
	}
	if _, err := r.c.Devices(); !errors.Is(err, ErrClosed) {
		t.Errorf("Devices after Close: %v", err)
	}
	if err := r.c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCloseAbortsBlockedStage closes the copier while a staging is blocked
// in a reader: Stage fails with ErrClosed without waiting for the reader,
// having freed its allocation, and Close returns, everything freed, once
// the reader gives its pinned buffer back.
func TestCloseAbortsBlockedStage(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	data := make([]byte, 30000)
	g := newGatedReader(data, 10000)
	defer g.open()
	errc := make(chan error, 1)
	go func() {
		_, err := r.c.Stage(context.Background(), 0, []Source{{Name: "slow", R: g, Len: int64(len(data))}}, StageOptions{})
		errc <- err
	}()
	await(t, g.entered, "the reader to block")
	closed := make(chan error, 1)
	go func() { closed <- r.c.Close() }()
	if err := await(t, errc, "Stage to fail"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Stage error %v, want ErrClosed", err)
	}
	r.expectClean(t) // the allocation is freed while the reader still blocks
	if r.drv.live().pinned == 0 {
		t.Fatal("the pinned pool was freed while a reader still held a buffer")
	}
	g.open()
	if err := await(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	if ls := r.drv.leaks(); len(ls) != 0 {
		t.Fatalf("after Close: %q", ls)
	}
}
