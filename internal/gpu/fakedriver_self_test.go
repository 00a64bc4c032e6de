package gpu

import (
	"errors"
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
		{"wild free", func(f *fakeDriver) error { return f.free(0, 12345) }, "never allocated"},
		{"use after free", func(f *fakeDriver) error {
			p, _ := f.alloc(0, 10)
			f.free(0, p)
			return f.copyToHost(0, make([]byte, 4), p+2)
		}, "after it was freed"},
		{"copy out of bounds", func(f *fakeDriver) error {
			p, _ := f.alloc(0, 10)
			h, _ := f.hostAlloc(0, 16)
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
			h, _ := f.hostAlloc(0, 10)
			f.copyAsync(0, 1, p, h)
			return f.free(0, p)
		}, "still queued"},
		{"hostFree under a queued copy", func(f *fakeDriver) error {
			p, _ := f.alloc(0, 10)
			h, _ := f.hostAlloc(0, 10)
			f.copyAsync(0, 1, p, h)
			return f.hostFree(0, h)
		}, "still queued"},
		{"read under a queued copy", func(f *fakeDriver) error {
			p, _ := f.alloc(0, 10)
			h, _ := f.hostAlloc(0, 10)
			f.copyAsync(0, 1, p, h)
			return f.copyToHost(0, make([]byte, 10), p)
		}, "queued"},
		{"detach with live memory", func(f *fakeDriver) error {
			f.alloc(0, 10)
			return f.detach(0)
		}, "still allocated"},
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
	h := must(f.hostAlloc(0, 100))(t)
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
	h := must(f.hostAlloc(0, 8))(t)
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
	h := must(f.hostAlloc(0, 8))(t)
	f.copyAsync(0, 0, p, h)
	f.inject(fakeFault{method: "record", dev: 0, code: cudaErrorIllegalAddress, sticky: true})
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
