package gpu

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/testutil"
)

// TestBudgetRefusesBeforeAllocating: a staging or Bench that would take
// the device past its budget, counted in whole granules, is refused with
// ErrBudget before anything is allocated, and the bytes come back with
// Release.
func TestBudgetRefusesBeforeAllocating(t *testing.T) {
	const g = 4096
	opts := smallOpts()
	opts.DeviceBudget = 3 * g
	r := newRig(t, opts, fakeConfig{granularity: g})
	rng := rand.New(rand.NewPCG(1, 1))
	srcs, want := makeSources(rng, 6000) // two granules
	l := r.stage(t, 0, srcs)
	srcs2, want2 := makeSources(rng, 3000, 3000) // two granules: 3072 + 3000
	if _, err := r.c.Stage(context.Background(), 0, srcs2, StageOptions{}); !errors.Is(err, ErrBudget) {
		t.Fatalf("Stage over budget: %v, want ErrBudget", err)
	}
	if _, err := r.c.Bench(context.Background(), 0, 5000); !errors.Is(err, ErrBudget) {
		t.Fatalf("Bench over budget: %v, want ErrBudget", err)
	}
	r.expectAllocs(t, 1)
	if n := r.leased(t, 0); n != 2*g {
		t.Errorf("LeasedBytes = %d, want %d", n, 2*g)
	}
	r.verify(t, l, want)
	if err := r.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	r.verify(t, r.stage(t, 0, srcs2), want2)
}

// TestBudgetFollowsDriverFreeMemory: the budget is what cuMemGetInfo
// reports free, less the headroom, so it counts what a fixed fraction of
// the device's total cannot: the context's own memory, the granularity,
// and the inference process next door. A staging that would eat into the
// headroom is refused with ErrBudget before anything is allocated, and
// one that fits once the other process lets go is admitted. Before, the
// budget was 90% of the total in requested bytes: the same stagings were
// admitted and failed in cuMemAlloc (or worse, left the inference
// process no memory).
func TestBudgetFollowsDriverFreeMemory(t *testing.T) {
	const mib = 1 << 20
	r := newRig(t, smallOpts(), fakeConfig{total: 64 * mib, granularity: 2 * mib, ctxOverhead: 8 * mib})
	r.drv.setOthers(0, 40*mib) // 16 MiB free; 6.4 MiB of headroom
	rng := rand.New(rand.NewPCG(5, 5))
	big, _ := makeSources(rng, 10*mib)
	_, err := r.c.Stage(context.Background(), 0, big, StageOptions{})
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("Stage into the headroom: %v, want ErrBudget", err)
	}
	r.expectAllocs(t, 0)
	small, want := makeSources(rng, 8*mib+1) // 10 MiB in granules: too much
	if _, err := r.c.Stage(context.Background(), 0, small, StageOptions{}); !errors.Is(err, ErrBudget) {
		t.Fatalf("Stage of 8 MiB + 1 byte, 10 MiB in granules: %v, want ErrBudget", err)
	}
	fits, fitsWant := makeSources(rng, 8*mib)
	l := r.stage(t, 0, fits)
	r.verify(t, l, fitsWant)
	ds, _ := r.c.Devices()
	if ds[0].FreeBytes != 8*mib || ds[0].BudgetBytes != l.Bytes+8*mib-ds[0].HeadroomBytes {
		t.Errorf("Devices = %+v", ds[0])
	}
	r.drv.setOthers(0, 20*mib)
	r.verify(t, r.stage(t, 0, small), want)
}

// TestBudgetCapsAllDevicesAlike: DeviceBudget caps each device separately
// and stagings on two devices do not count against each other.
func TestBudgetCapsAllDevicesAlike(t *testing.T) {
	const g = 4096
	opts := smallOpts()
	opts.DeviceBudget = 2 * g
	r := newRig(t, opts, fakeConfig{devices: 2, granularity: g})
	rng := rand.New(rand.NewPCG(6, 6))
	for dev := range 2 {
		srcs, _ := makeSources(rng, 2*g)
		r.stage(t, dev, srcs)
		if _, err := r.c.Stage(context.Background(), dev, srcs, StageOptions{}); !errors.Is(err, ErrBudget) {
			t.Errorf("second staging on device %d: %v, want ErrBudget", dev, err)
		}
	}
}

// TestBudgetKeptWhenFreeFails: when a free fails the driver still holds
// the memory, so its bytes stay counted against the budget (a staging
// that would need them gets ErrBudget, not a driver failure), on every
// path that frees; Close frees it in the end. Before, each path returned
// the bytes to the budget whatever the free did.
func TestBudgetKeptWhenFreeFails(t *testing.T) {
	const g = 4096
	const size = 6000 // two granules
	for _, tc := range []struct {
		name string
		free string // the driver method whose failure is injected
		// leave makes size bytes to be freed, with the free failing, and
		// returns the error that reports it.
		leave func(t *testing.T, r *rig, srcs []Source, logs *syncBuffer) error
	}{
		{"release", "vmmFree", func(t *testing.T, r *rig, srcs []Source, _ *syncBuffer) error {
			return r.c.Release(r.stage(t, 0, srcs).ID)
		}},
		{"expiry", "vmmFree", func(t *testing.T, r *rig, srcs []Source, logs *syncBuffer) error {
			l := r.stage(t, 0, srcs)
			r.clk.awaitAlarm(t, l.Expires)
			r.clk.advance(r.c.opts.LeaseTTL)
			r.clk.awaitAlarm(t, time.Time{})
			return errors.New(logs.String()) // the reaper can only log it
		}},
		{"failed stage", "vmmFree", func(t *testing.T, r *rig, srcs []Source, _ *syncBuffer) error {
			r.drv.inject(fakeFault{method: "wait", code: cudaErrorUnknown})
			_, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
			if !hasCall(err, "cuEventSynchronize") {
				t.Errorf("Stage: %v, want the wait's failure", err)
			}
			return err
		}},
		{"legacy release", "free", func(t *testing.T, r *rig, srcs []Source, _ *syncBuffer) error {
			l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{Handover: HandoverIPC})
			if err != nil {
				t.Fatal(err)
			}
			return r.c.Release(l.ID)
		}},
		{"bench", "free", func(t *testing.T, r *rig, _ []Source, _ *syncBuffer) error {
			_, err := r.c.Bench(context.Background(), 0, size)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := smallOpts()
			opts.DeviceBudget = 3 * g
			logs := &syncBuffer{}
			opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
			r := newRig(t, opts, fakeConfig{granularity: g})
			r.drv.inject(fakeFault{method: tc.free, code: cudaErrorUnknown})
			srcs, _ := makeSources(rand.New(rand.NewPCG(2, 2)), size)
			err := tc.leave(t, r, srcs, logs)
			if err == nil || !strings.Contains(err.Error(), cudaCall(tc.free)) {
				t.Errorf("the failed free was not reported: %v", err)
			}
			if n := r.leased(t, 0); n != 2*g {
				t.Errorf("LeasedBytes = %d after a failed free, want %d", n, 2*g)
			}
			if l := r.drv.live(); l.allocs != 1 {
				t.Fatalf("the fake holds %d allocations, want the one whose free failed", l.allocs)
			}
			if _, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{}); !errors.Is(err, ErrBudget) {
				t.Errorf("Stage needing the unfreed bytes: %v, want ErrBudget", err)
			}
			if err := r.c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer a logger may write while a test reads it.
type syncBuffer = testutil.SyncBuffer

// TestBenchReturnsEverything: Bench measures both paths, then frees its
// allocation and pageable buffer and returns its budget.
func TestBenchReturnsEverything(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	res, err := r.c.Bench(context.Background(), 0, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	if res.Device != 0 || res.Bytes != 100_000 {
		t.Errorf("Bench = %+v", res)
	}
	r.expectClean(t)
	if l := r.drv.live(); l.pageable != 0 {
		t.Errorf("%d pageable buffers live", l.pageable)
	}
	if r.drv.count("copyToDevice") < 1 || r.drv.count("copyAsync") < 1 {
		t.Error("Bench skipped a path")
	}
	if n := r.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d after Bench", n)
	}
}
