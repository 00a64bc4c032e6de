package gpu

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBudgetRefusesBeforeAllocating: a staging or Bench that would take
// the device past its budget is refused with ErrBudget before anything is
// allocated, and the bytes come back with Release.
func TestBudgetRefusesBeforeAllocating(t *testing.T) {
	opts := smallOpts()
	opts.DeviceBudget = 10000
	r := newRig(t, opts, fakeConfig{})
	rng := rand.New(rand.NewPCG(1, 1))
	srcs, want := makeSources(rng, 6000)
	l, err := r.c.Stage(context.Background(), 0, srcs)
	if err != nil {
		t.Fatal(err)
	}
	srcs2, want2 := makeSources(rng, 3000, 3000)
	if _, err := r.c.Stage(context.Background(), 0, srcs2); !errors.Is(err, ErrBudget) {
		t.Fatalf("Stage over budget: %v, want ErrBudget", err)
	}
	if _, err := r.c.Bench(context.Background(), 0, 5000); !errors.Is(err, ErrBudget) {
		t.Fatalf("Bench over budget: %v, want ErrBudget", err)
	}
	r.expectCount(t, "alloc", 1)
	if n := r.leased(t, 0); n != 6000 {
		t.Errorf("LeasedBytes = %d, want 6000", n)
	}
	r.verify(t, l, want)
	if err := r.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	l2, err := r.c.Stage(context.Background(), 0, srcs2)
	if err != nil {
		t.Fatalf("Stage after Release: %v", err)
	}
	r.verify(t, l2, want2)
}

// TestBudgetKeptWhenFreeFails: when cuMemFree fails the driver still
// holds the memory, so its bytes stay counted against the budget (a
// staging that would need them gets ErrBudget, not a driver failure), on
// every path that frees; Close frees it in the end. Before, each path
// returned the bytes to the budget whatever the free did.
func TestBudgetKeptWhenFreeFails(t *testing.T) {
	const size = 6000
	for _, tc := range []struct {
		name string
		// leave makes size bytes to be freed, with the free failing, and
		// returns the error that reports it.
		leave func(t *testing.T, r *rig, srcs []Source, logs *syncBuffer) error
	}{
		{"release", func(t *testing.T, r *rig, srcs []Source, _ *syncBuffer) error {
			l, err := r.c.Stage(context.Background(), 0, srcs)
			if err != nil {
				t.Fatal(err)
			}
			return r.c.Release(l.ID)
		}},
		{"expiry", func(t *testing.T, r *rig, srcs []Source, logs *syncBuffer) error {
			l, err := r.c.Stage(context.Background(), 0, srcs)
			if err != nil {
				t.Fatal(err)
			}
			r.clk.awaitAlarm(t, l.Expires)
			r.clk.advance(r.c.opts.LeaseTTL)
			r.clk.awaitAlarm(t, time.Time{})
			return errors.New(logs.String()) // the reaper can only log it
		}},
		{"failed stage", func(t *testing.T, r *rig, srcs []Source, _ *syncBuffer) error {
			r.drv.inject(fakeFault{method: "ipcHandle", code: cudaErrorUnknown})
			_, err := r.c.Stage(context.Background(), 0, srcs)
			asDriverError(t, err, "cuIpcGetMemHandle", cudaErrorUnknown)
			return err
		}},
		{"bench", func(t *testing.T, r *rig, _ []Source, _ *syncBuffer) error {
			_, err := r.c.Bench(context.Background(), 0, size)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := smallOpts()
			opts.DeviceBudget = 10000
			logs := &syncBuffer{}
			opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
			r := newRig(t, opts, fakeConfig{})
			r.drv.inject(fakeFault{method: "free", code: cudaErrorUnknown})
			srcs, _ := makeSources(rand.New(rand.NewPCG(2, 2)), size)
			err := tc.leave(t, r, srcs, logs)
			if err == nil || !strings.Contains(err.Error(), "cuMemFree_v2") {
				t.Errorf("the failed free was not reported: %v", err)
			}
			if n := r.leased(t, 0); n != size {
				t.Errorf("LeasedBytes = %d after a failed free, want %d", n, size)
			}
			if l := r.drv.live(); l.allocs != 1 {
				t.Fatalf("the fake holds %d allocations, want the one whose free failed", l.allocs)
			}
			if _, err := r.c.Stage(context.Background(), 0, srcs); !errors.Is(err, ErrBudget) {
				t.Errorf("Stage needing the unfreed bytes: %v, want ErrBudget", err)
			}
			if err := r.c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer a logger may write while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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
