package gpu

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestStageRoundTripOnFake stages tensors of awkward sizes and counts
// through copies that run only when waited for: every byte lands at its
// placement, gaps are zero, one allocation per lease, the pool is pinned
// once, and every async copy is from pinned memory (the fake refuses any
// other).
func TestStageRoundTripOnFake(t *testing.T) {
	opts := smallOpts()
	pool := int64(opts.PinnedBuffers) * opts.BufferSize
	rng := rand.New(rand.NewPCG(1, 2))
	many := make([]int64, 300)
	for i := range many {
		many[i] = rng.Int64N(300) // includes empty tensors
	}
	cases := []struct {
		name  string
		sizes []int64
	}{
		{"one byte", []int64{1}},
		{"buffer edges", []int64{4095, 4096, 4097, 1, 8191, 12289}},
		{"odd sizes", []int64{10000, 123457, 3, 77777}},
		{"many small packed", many},
		{"larger than the pool", []int64{5*pool + 17}},
		{"empty between", []int64{0, 100, 0, 0, 5000, 0}},
	}
	r := newRig(t, opts, fakeConfig{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srcs, want := makeSources(rng, tc.sizes...)
			l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
			if err != nil {
				t.Fatalf("Stage: %v", err)
			}
			r.verify(t, l, want)
			if err := r.c.Release(l.ID); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	}
	r.expectAllocs(t, len(cases))
	r.expectCount(t, "hostAlloc", opts.PinnedBuffers)
	r.expectClean(t)
}

// TestConcurrentStagesShareThePool runs stagings from several goroutines
// over a pool smaller than their demand: a buffer reused before its copy
// ran, or a piece landing in another lease, shows up as wrong bytes (and,
// for reuse, as a race).
func TestConcurrentStagesShareThePool(t *testing.T) {
	opts := Options{PinnedBuffers: 2, BufferSize: 1024, Streams: 2, Alignment: 64}
	r := newRig(t, opts, fakeConfig{})
	const workers, rounds = 6, 3
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				sizes := make([]int64, 1+rng.IntN(5))
				for i := range sizes {
					sizes[i] = 1 + rng.Int64N(6000)
				}
				srcs, want := makeSources(rng, sizes...)
				l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{})
				if err != nil {
					t.Errorf("worker %d: Stage: %v", w, err)
					return
				}
				r.verify(t, l, want)
				if err := r.c.Release(l.ID); err != nil {
					t.Errorf("worker %d: Release: %v", w, err)
				}
			}
		})
	}
	wg.Wait()
	r.expectCount(t, "hostAlloc", opts.PinnedBuffers)
	r.expectAllocs(t, workers*rounds)
	r.expectClean(t)
}

// TestPoolPinnedOnce: however many stagings and Bench runs, each device is
// attached once and the pool pinned once.
func TestPoolPinnedOnce(t *testing.T) {
	opts := smallOpts()
	r := newRig(t, opts, fakeConfig{devices: 2})
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 8 {
		srcs, want := makeSources(rng, int64(i)*5000+1, 300)
		l, err := r.c.Stage(context.Background(), i%2, srcs, StageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.verify(t, l, want)
	}
	if _, err := r.c.Bench(context.Background(), 0, 50000); err != nil {
		t.Fatal(err)
	}
	r.expectCount(t, "hostAlloc", 2*opts.PinnedBuffers) // a pool per device
	r.expectCount(t, "attach", 2)
}

// TestBadRequestsOnFake: invalid sources, devices and read-back ranges
// are refused with ErrBadRequest or ErrBadDevice before touching the
// driver.
func TestBadRequestsOnFake(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	ctx := context.Background()
	srcs, _ := makeSources(rand.New(rand.NewPCG(7, 7)), 10)
	for name, s := range map[string][]Source{
		"no sources":   nil,
		"nil reader":   {{Name: "x", Len: 1}},
		"negative len": {{Name: "x", R: srcs[0].R, Len: -1}},
		"negative off": {{Name: "x", R: srcs[0].R, Off: -1, Len: 1}},
		"all empty":    {{Name: "x", R: srcs[0].R}},
	} {
		if _, err := r.c.Stage(ctx, 0, s, StageOptions{}); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", name, err)
		}
	}
	for _, dev := range []int{-1, 1} {
		if _, err := r.c.Stage(ctx, dev, srcs, StageOptions{}); !errors.Is(err, ErrBadDevice) {
			t.Errorf("device %d: %v, want ErrBadDevice", dev, err)
		}
	}
	r.expectCount(t, "attach", 0)
	l, err := r.c.Stage(ctx, 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reads := r.drv.count("copyToHost")
	b := l.Bytes // the allocation, rounded up to the granularity: all of it reads back
	for _, rg := range []struct{ off, n int64 }{{-1, 1}, {0, b + 1}, {b, 1}, {b + 1, 0}} {
		if err := r.c.ReadBack(ctx, l.ID, rg.off, make([]byte, rg.n)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ReadBack(%d, %d bytes): %v, want ErrBadRequest", rg.off, rg.n, err)
		}
	}
	r.expectCount(t, "copyToHost", reads)
	if _, err := r.c.Bench(ctx, 0, 0); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Bench(0 bytes): %v", err)
	}
	if _, err := r.c.ExportFD("no-such-lease"); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("ExportFD of an unknown lease: %v", err)
	}
}
