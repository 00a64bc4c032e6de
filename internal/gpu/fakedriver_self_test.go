package gpu

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// The tests in this file prove the Go fake catches what the logic tests
// rely on it to catch: a fake that missed misuse would pass broken code.

// attached returns a fake with device 0 attached (2 streams, 2 events).
func attached(t *testing.T, cfg fakeConfig) *fakeDriver {
	t.Helper()
	f := newFakeDriver(cfg)
	if err := f.attach(0, 2, 2); err != nil {
		t.Fatal(err)
	}
	return f
}

// must returns v, failing the test if err is not nil.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestFakeDriverFlagsMisuse(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(f *fakeDriver) error // the misuse; earlier steps must succeed
		want string                    // in the misuse recorded
	}{
		{"call on a detached device", func(f *fakeDriver) error {
			_, err := f.alloc(1, 10)
			return err
		}, "not attached"},
		{"double free", func(f *fakeDriver) error {
			p, _ := f.alloc(0, 10)
			f.free(0, p)
			return f.free(0, p)
		}, "double free"},
		{"wild free", func(f *fakeDriver) error { return f.free(0, 12345) }, "did not return"},
		{"use after free", func(f *fakeDriver) error {
			p, _ := f.alloc(0, 10)
			f.free(0, p)
			return f.copyToHost(0, make([]byte, 4), p+2)
		}, "after it was freed"},
		{"copy out of bounds", func(f *fakeDriver) error {
			p, _ := f.alloc(0, 10)
			h, _ := f.hostAlloc(0, 16, -1)
			return f.copyAsync(0, 0, p+4, h[:8])
		}, "overruns"},
		{"copy from pageable memory", func(f *fakeDriver) error {
			p, _ := f.alloc(0, 10)
			return f.copyAsync(0, 0, p, make([]byte, 8))
		}, "not pinned"},
		{"hostFree of unknown memory", func(f *fakeDriver) error {
			return f.hostFree(0, make([]byte, 8))
		}, "did not return"},
		{"free under a queued copy", func(f *fakeDriver) error {
			p, _ := f.alloc(0, 10)
			h, _ := f.hostAlloc(0, 10, -1)
			f.copyAsync(0, 1, p, h)
			return f.free(0, p)
		}, "still queued"},
		{"hostFree under a queued copy", func(f *fakeDriver) error {
			p, _ := f.alloc(0, 10)
			h, _ := f.hostAlloc(0, 10, -1)
			f.copyAsync(0, 1, p, h)
			return f.hostFree(0, h)
		}, "still queued"},
		{"read under a queued copy", func(f *fakeDriver) error {
			p, _ := f.alloc(0, 10)
			h, _ := f.hostAlloc(0, 10, -1)
			f.copyAsync(0, 1, p, h)
			return f.copyToHost(0, make([]byte, 10), p)
		}, "queued"},
		{"detach with live memory", func(f *fakeDriver) error {
			f.alloc(0, 10)
			return f.detach(0)
		}, "still mapped"},
		{"VMM size off the granularity", func(f *fakeDriver) error {
			_, err := f.vmmAlloc(0, f.cfg.granularity+1)
			return err
		}, "granularity"},
		{"double vmmFree", func(f *fakeDriver) error {
			m, _ := f.vmmAlloc(0, f.cfg.granularity)
			f.vmmFree(0, m)
			return f.vmmFree(0, m)
		}, "not a live VMM allocation"},
		{"legacy free of VMM memory", func(f *fakeDriver) error {
			m, _ := f.vmmAlloc(0, f.cfg.granularity)
			defer f.vmmFree(0, m)
			return f.free(0, m.ptr)
		}, "cuMemAlloc did not return"},
		{"bad event", func(f *fakeDriver) error { return f.wait(0, 2) }, "event 2 of 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := attached(t, fakeConfig{devices: 2})
			err := tc.do(f)
			ms := f.misused()
			if len(ms) == 0 || !strings.Contains(strings.Join(ms, "\n"), tc.want) {
				t.Fatalf("misuse %q not recorded; got %q", tc.want, ms)
			}
			// Reading under a queued copy is let through (and recorded),
			// as the data race it is on a GPU; everything else fails.
			var de *DriverError
			if tc.name != "read under a queued copy" && !errors.As(err, &de) {
				t.Errorf("the misuse returned %v, want a *DriverError", err)
			}
		})
	}
}

func TestFakeDriverReportsLeaks(t *testing.T) {
	f := attached(t, fakeConfig{})
	if got := f.leaks(); len(got) != 1 || !strings.Contains(got[0], "attached") {
		t.Fatalf("leaks = %q, want the attached device", got)
	}
	p := must(f.alloc(0, 100))(t)
	h := must(f.hostAlloc(0, 100, -1))(t)
	pg := must(f.pageable(100))(t)
	if got := f.leaks(); len(got) != 4 {
		t.Fatalf("leaks = %q, want memory, pinned, pageable and the device", got)
	}
	f.free(0, p)
	f.hostFree(0, h)
	f.freePageable(pg)
	f.detach(0)
	if got, ms := f.leaks(), f.misused(); len(got) != 0 || len(ms) != 0 {
		t.Fatalf("after freeing all: leaks %q, misuse %q", got, ms)
	}
}

// TestFakeDriverCopiesRunWhenWaited: a queued copy reads its source only
// when waited for, and an event covers only what was queued before it.
func TestFakeDriverCopiesRunWhenWaited(t *testing.T) {
	f := attached(t, fakeConfig{})
	p := must(f.alloc(0, 8))(t)
	h := must(f.hostAlloc(0, 8, -1))(t)
	copy(h, "aaaaaaaa")
	f.copyAsync(0, 0, p, h[:4])
	f.record(0, 0, 0)
	f.copyAsync(0, 0, p+4, h[4:])
	copy(h, "bbbbbbbb") // before any wait: the queued copies will read this
	if n := f.queuedFrom(h); n != 2 {
		t.Fatalf("queuedFrom = %d, want 2", n)
	}
	if err := f.wait(0, 0); err != nil {
		t.Fatal(err)
	}
	if n := f.queuedInto(p); n != 1 {
		t.Fatalf("after the event, %d copies queued, want 1 (the one after it)", n)
	}
	copy(h[4:], "cccc")
	if err := f.syncStream(0, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	f.copyToHost(0, got, p)
	if string(got) != "bbbbcccc" {
		t.Fatalf("device holds %q, want the sources as they were when each copy ran", got)
	}
	if ms := f.misused(); len(ms) != 0 {
		t.Fatal(ms)
	}
}

func TestFakeDriverFaults(t *testing.T) {
	f := newFakeDriver(fakeConfig{devices: 2})
	for dev := range 2 {
		if err := f.attach(dev, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	// The third alloc on device 1 fails twice; device 0 is not counted.
	f.inject(fakeFault{method: "alloc", dev: 1, after: 2, times: 2, code: cudaErrorUnknown})
	var errs []bool
	for range 5 {
		_, err := f.alloc(1, 1)
		errs = append(errs, err != nil)
		must(f.alloc(0, 1))(t)
	}
	if want := []bool{false, false, true, true, false}; !slices.Equal(errs, want) {
		t.Errorf("alloc failures %v, want %v", errs, want)
	}
	if n := f.count("alloc"); n != 10 {
		t.Errorf("count = %d, want 10 (failures included)", n)
	}
}

// TestFakeDriverStickyFault: a sticky fault kills only its device's
// context, drops its queued work, fails every later call on it, and detach
// ends the dead context with everything in it; attach starts afresh.
func TestFakeDriverStickyFault(t *testing.T) {
	f := newFakeDriver(fakeConfig{devices: 2})
	for dev := range 2 {
		if err := f.attach(dev, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	p := must(f.alloc(0, 8))(t)
	h := must(f.hostAlloc(0, 8, -1))(t)
	f.copyAsync(0, 0, p, h)
	f.inject(fakeFault{method: "record", dev: 0, code: cudaErrorIllegalAddress}) // sticky by its code
	asDriverError(t, f.record(0, 0, 0), "cuEventRecord", cudaErrorIllegalAddress)
	asDriverError(t, f.free(0, p), "cuMemFree_v2", cudaErrorIllegalAddress)
	_, err := f.alloc(0, 8)
	asDriverError(t, err, "cuMemAlloc_v2", cudaErrorIllegalAddress)
	if n := f.queuedInto(p); n != 0 {
		t.Errorf("%d copies still queued on a dead context", n)
	}
	q := must(f.alloc(1, 8))(t) // the other device lives on
	f.free(1, q)
	if err := f.detach(0); err != nil {
		t.Fatal(err)
	}
	if l := f.live(); l.allocs != 0 || l.pinned != 0 || l.attached != 1 {
		t.Errorf("after detaching the dead device: %+v", l)
	}
	if err := f.attach(0, 1, 1); err != nil {
		t.Fatal(err)
	}
	p2 := must(f.alloc(0, 8))(t)
	if p2 == p {
		t.Error("a pointer was reused after reattaching")
	}
	f.free(0, p2)
	f.detach(0)
	f.detach(1)
	if ms, ls := f.misused(), f.leaks(); len(ms) != 0 || len(ls) != 0 {
		t.Fatalf("misuse %q, leaks %q", ms, ls)
	}
}

func TestFakeDriverGranularity(t *testing.T) {
	f := attached(t, fakeConfig{total: 10 << 20, granularity: 1 << 20})
	free := func() int64 {
		n, total, err := f.memInfo(0)
		if err != nil || total != 10<<20 {
			t.Fatalf("memInfo: %d, %d, %v", n, total, err)
		}
		return n
	}
	p := must(f.alloc(0, 1))(t)
	q := must(f.alloc(0, 1<<20+1))(t)
	if got := free(); got != 7<<20 {
		t.Errorf("free after 1 byte and 1 MiB+1 = %d, want 7 MiB", got)
	}
	if q-p < 1<<20 {
		t.Errorf("allocations %#x and %#x closer than the granularity", p, q)
	}
	// A small allocation shares the first one's block, as cuMemAlloc's do.
	s := must(f.alloc(0, 100))(t)
	if s-p >= 1<<20 || free() != 7<<20 {
		t.Errorf("a small allocation at %#x did not share the block at %#x (free %d)", s, p, free())
	}
	f.free(0, s)
	_, err := f.alloc(0, 7<<20+1)
	asDriverError(t, err, "cuMemAlloc_v2", cudaErrorOutOfMemory)
	r := must(f.alloc(0, 7<<20))(t)
	f.free(0, p)
	f.free(0, q)
	f.free(0, r)
	if got := free(); got != 10<<20 {
		t.Errorf("free after freeing all = %d", got)
	}
	if ms := f.misused(); len(ms) != 0 {
		t.Fatal(ms)
	}
}

// TestFakeDriverIPCSharesTheBlock: an IPC handle of a small allocation
// maps its whole block, so its importer reads a neighbour's bytes; and
// after the exporter frees the memory, the importer reads garbage.
func TestFakeDriverIPCSharesTheBlock(t *testing.T) {
	f := attached(t, fakeConfig{granularity: 1 << 20})
	a := must(f.alloc(0, 1000))(t)
	b := must(f.alloc(0, 1000))(t)
	f.copyToDevice(0, b, []byte("neighbour"))
	f.syncDevice(0)
	imp := must(f.importIPC(must(f.ipcHandle(0, a))(t)))(t)
	got := make([]byte, 9)
	if err := imp.read(int64(b-a), got); err != nil || string(got) != "neighbour" {
		t.Fatalf("through a's handle at b: %q, %v; want the neighbour's bytes", got, err)
	}
	f.copyToDevice(0, a, []byte("mine"))
	f.syncDevice(0)
	f.free(0, a)
	if err := imp.read(0, got[:4]); err != nil || string(got[:4]) == "mine" {
		t.Fatalf("after the free: %q, %v; want garbage", got[:4], err)
	}
	imp.close()
	f.free(0, b)
	f.detach(0)
	if ms, ls := f.misused(), f.leaks(); len(ms) != 0 || len(ls) != 0 {
		t.Fatalf("misuse %q, leaks %q", ms, ls)
	}
}

// TestFakeDriverVMMImportOutlivesTheExporter: memory imported from an
// exported file descriptor stays readable after the exporter unmaps and
// releases it and after its context is reset; an exported descriptor never
// imported holds the memory too, until it is closed; the physical memory
// counts as used until the last of them goes.
func TestFakeDriverVMMImportOutlivesTheExporter(t *testing.T) {
	const g = 1 << 20
	f := attached(t, fakeConfig{total: 8 << 20, granularity: g, ctxOverhead: 1 << 20})
	f.setOthers(0, 2<<20)
	if free, _, _ := f.memInfo(0); free != 5<<20 {
		t.Fatalf("free = %d, want total less the context and the other process", free)
	}
	m := must(f.vmmAlloc(0, g))(t)
	f.copyToDevice(0, m.ptr, []byte("weights"))
	f.syncDevice(0)
	fd := must(f.exportFD(0, m))(t)
	file := os.NewFile(uintptr(fd), "vmm")
	imp := must(f.importFD(file))(t)
	file.Close()
	if err := f.vmmFree(0, m); err != nil {
		t.Fatal(err)
	}
	if err := f.reset(0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 7)
	if err := imp.read(0, got); err != nil || string(got) != "weights" {
		t.Fatalf("after the exporter let go: %q, %v", got, err)
	}
	f.attach(0, 1, 1)
	if free, _, _ := f.memInfo(0); free != 4<<20 {
		t.Errorf("free = %d while the import holds %d", free, g)
	}
	imp.close()
	if free, _, _ := f.memInfo(0); free != 5<<20 {
		t.Errorf("free = %d after the import closed", free)
	}

	// An exported descriptor nobody imported keeps the memory allocated
	// after the exporter unmaps and releases it (cuMemRelease's docs), and
	// can still be imported then; closing it frees the memory.
	m = must(f.vmmAlloc(0, g))(t)
	f.copyToDevice(0, m.ptr, []byte("kept"))
	f.syncDevice(0)
	fd = must(f.exportFD(0, m))(t)
	file = os.NewFile(uintptr(fd), "vmm")
	f.vmmFree(0, m)
	if free, _, _ := f.memInfo(0); free != 4<<20 {
		t.Errorf("free = %d after release with the descriptor open, want %d", free, 4<<20)
	}
	imp = must(f.importFD(file))(t)
	file.Close()
	if err := imp.read(0, got[:4]); err != nil || string(got[:4]) != "kept" {
		t.Fatalf("imported after the release: %q, %v", got[:4], err)
	}
	imp.close()
	if free, _, _ := f.memInfo(0); free != 5<<20 {
		t.Errorf("free = %d after the descriptor and import closed", free)
	}
	m = must(f.vmmAlloc(0, g))(t)
	fd = must(f.exportFD(0, m))(t)
	f.vmmFree(0, m)
	os.NewFile(uintptr(fd), "vmm").Close()
	if free, _, _ := f.memInfo(0); free != 5<<20 {
		t.Errorf("free = %d after the unimported descriptor closed", free)
	}
	f.detach(0)
	if ms := f.misused(); len(ms) != 0 {
		t.Fatal(ms)
	}
}

// TestFakeDriverLeaksExportedFDs: a descriptor exportFD made and nobody
// closed is a leak.
func TestFakeDriverLeaksExportedFDs(t *testing.T) {
	f := attached(t, fakeConfig{})
	m := must(f.vmmAlloc(0, f.cfg.granularity))(t)
	fd := must(f.exportFD(0, m))(t)
	f.vmmFree(0, m)
	f.detach(0)
	if got := f.leaks(); len(got) != 1 || !strings.Contains(got[0], "file descriptor") {
		t.Fatalf("leaks = %q, want the descriptor", got)
	}
	os.NewFile(uintptr(fd), "vmm").Close()
	if got := f.leaks(); len(got) != 0 {
		t.Fatalf("leaks after closing = %q", got)
	}
}

// TestFakeDriverPageableDMA: a pageable copy's DMA is still running when
// copyToDevice returns, until syncDevice.
func TestFakeDriverPageableDMA(t *testing.T) {
	f := attached(t, fakeConfig{})
	p := must(f.alloc(0, 8))(t)
	f.copyToDevice(0, p, []byte("abcdefgh"))
	if !f.dmaPending(0) || f.queuedInto(p) != 1 {
		t.Fatal("the DMA finished with the call")
	}
	f.syncDevice(0)
	if f.dmaPending(0) || f.queuedInto(p) != 0 {
		t.Fatal("syncDevice left the DMA running")
	}
	f.free(0, p)
	f.detach(0)
	if ms := f.misused(); len(ms) != 0 {
		t.Fatal(ms)
	}
}
