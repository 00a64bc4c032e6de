package gpu

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// rig is a Copier over a Go fake driver and a manual clock. Its cleanup
// closes the copier, then fails the test for any misuse or leak the fake
// saw (a test that expects Close to fail calls Close itself first). It is
// the driverView the scenarios (scenarios_test.go) check the Go fake with.
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
// handover as the consumer would.
func (r *rig) verify(t *testing.T, l *Lease, want [][]byte) {
	t.Helper()
	img := verifyImage(t, r.c, l, want, r.c.opts.Alignment)
	imp := r.importLease(t, l)
	defer imp.close()
	got := make([]byte, l.Bytes)
	if err := imp.read(0, got); err != nil || !bytes.Equal(got, img) {
		t.Errorf("reading through the %v handover: %v, equal %v", l.Handover, err, bytes.Equal(got, img))
	}
}

// importLease maps a lease as a consumer would: the file descriptor of a
// HandoverFD lease (which the test's consumer imports with a reference of
// its own, and must close), or the IPC handle of a HandoverIPC one.
func (r *rig) importLease(t *testing.T, l *Lease) *fakeImport {
	t.Helper()
	if l.Handover == HandoverIPC {
		imp, err := r.drv.importIPC(l.IPCHandle)
		if err != nil {
			t.Fatalf("importing the IPC handle: %v", err)
		}
		return imp
	}
	f, err := r.c.ExportFD(l.ID)
	if err != nil {
		t.Fatalf("ExportFD: %v", err)
	}
	defer f.Close()
	imp, err := r.drv.importFD(f)
	if err != nil {
		t.Fatalf("importing the file descriptor: %v", err)
	}
	return imp
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
	if l := r.drv.live(); l.allocs != 0 || l.phys != 0 {
		t.Errorf("%d device mappings and %d physical allocations live", l.allocs, l.phys)
	}
	for _, m := range r.drv.misused() {
		t.Errorf("fake driver: misuse: %s", m)
	}
}

// expectNoLeaks fails the test if the fake holds anything at all (see
// leaks), as after Close.
func (r *rig) expectNoLeaks(t *testing.T) {
	t.Helper()
	if ls := r.drv.leaks(); len(ls) != 0 {
		t.Errorf("left behind: %q", ls)
	}
}

// expectAllocs and expectFrees count device allocations and frees of
// either kind: VMM (the default handover) and legacy.
func (r *rig) expectAllocs(t *testing.T, want int) {
	t.Helper()
	if got := r.drv.count("alloc") + r.drv.count("vmmAlloc"); got != want {
		t.Errorf("device allocations = %d, want %d", got, want)
	}
}

func (r *rig) expectFrees(t *testing.T, want int) {
	t.Helper()
	if got := r.drv.count("free") + r.drv.count("vmmFree"); got != want {
		t.Errorf("device frees = %d, want %d", got, want)
	}
}

func (r *rig) expectCount(t *testing.T, method string, want int) {
	t.Helper()
	if got := r.drv.count(method); got != want {
		t.Errorf("%s calls = %d, want %d", method, got, want)
	}
}

// count returns how many calls of method were made, failed ones included.
func (r *rig) count(method string) int { return r.drv.count(method) }

// pinned returns the pinned buffers live; the fake always knows.
func (r *rig) pinned() (int, bool) { return r.drv.live().pinned, true }

// stage stages srcs on dev with the default handover, failing the test on
// an error.
func (r *rig) stage(t *testing.T, dev int, srcs []Source) *Lease {
	t.Helper()
	l, err := r.c.Stage(context.Background(), dev, srcs, StageOptions{})
	if err != nil {
		t.Fatalf("Stage: %v", err)
	}
	return l
}

// awaitRecovery waits for dev's recovery, if one was started, to end.
func (r *rig) awaitRecovery(t *testing.T, dev int) {
	t.Helper()
	r.c.mu.Lock()
	ch := r.c.devs[dev].recovered
	r.c.mu.Unlock()
	if ch != nil {
		await(t, ch, "the device's recovery")
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
