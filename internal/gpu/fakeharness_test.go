package gpu

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
)

// rig is a Copier over a Go fake driver and a manual clock. Its cleanup
// closes the copier, then fails the test for any misuse or leak the fake
// saw (a test that expects Close to fail calls Close itself first).
type rig struct {
	c   *Copier
	drv *fakeDriver
	clk *fakeClock
}

func newRig(t *testing.T, opts Options, cfg fakeConfig) *rig {
	t.Helper()
	opts, err := opts.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	drv := newFakeDriver(cfg)
	drv.checkAtEnd(t) // registered first, so it runs after Close
	clk := newFakeClock()
	c := newCopier(opts, drv, clk)
	if !c.Available() {
		_, why := c.Devices()
		t.Fatalf("copier unavailable: %v", why)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &rig{c: c, drv: drv, clk: clk}
}

// verify checks a lease's bytes (see verifyImage) and reads it through its
// IPC handle as the consumer would.
func (r *rig) verify(t *testing.T, l *Lease, want [][]byte) {
	t.Helper()
	img := verifyImage(t, r.c, l, want, r.c.opts.Alignment)
	got := make([]byte, l.Bytes)
	if err := r.drv.ipcRead(l.IPCHandle, 0, got); err != nil || !bytes.Equal(got, img) {
		t.Errorf("reading through the IPC handle: %v, equal %v", err, bytes.Equal(got, img))
	}
}

// leased returns the device's LeasedBytes.
func (r *rig) leased(t *testing.T, dev int) int64 {
	t.Helper()
	ds, err := r.c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	return ds[dev].LeasedBytes
}

// expectClean fails the test if the fake holds device memory or saw misuse.
func (r *rig) expectClean(t *testing.T) {
	t.Helper()
	if n := r.drv.live().allocs; n != 0 {
		t.Errorf("%d device allocations live", n)
	}
	for _, m := range r.drv.misused() {
		t.Errorf("fake driver: misuse: %s", m)
	}
}

func (r *rig) expectCount(t *testing.T, method string, want int) {
	t.Helper()
	if got := r.drv.count(method); got != want {
		t.Errorf("%s calls = %d, want %d", method, got, want)
	}
}

// latch is a release channel that may be opened more than once, so that a
// test can also defer opening it and never leave a held call hanging.
type latch struct {
	ch   chan struct{}
	once sync.Once
}

func newLatch() *latch { return &latch{ch: make(chan struct{})} }
func (l *latch) open() { l.once.Do(func() { close(l.ch) }) }

// holdFirst returns a hook that holds the first call in the hooked method
// until release is closed, closing entered once it is held. Later calls,
// concurrent ones included, pass straight through.
func holdFirst(entered, release chan struct{}) func(int) {
	var held atomic.Bool
	return func(int) {
		if held.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
	}
}
