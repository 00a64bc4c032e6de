//go:build cuda && cgo && linux

package gpu

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

// TestStageOutOfMemory: where the driver refuses an allocation the budget
// admitted, the failure surfaces as CUDA's and nothing is kept.
func TestStageOutOfMemory(t *testing.T) {
	opts := smallOpts()
	h := newHarness(t, opts, nil)
	h.needFake(t)
	h.fc.fail("cuMemCreate", cudaErrorOutOfMemory, 0, 1)
	rng := rand.New(rand.NewPCG(1, 1))
	srcs, want := makeSources(rng, 5000)
	_, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
	asDriverError(t, err, "cuMemCreate", cudaErrorOutOfMemory)
	var de *DriverError
	errors.As(err, &de)
	if de.Name != cudaErrorOutOfMemoryName {
		t.Errorf("Name = %q", de.Name)
	}
	h.expectLive(t, map[string]int64{"alloc": 0, "phys": 0})
	if n := h.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d after a failed Stage", n)
	}
	verify(t, h, h.stage(t, 0, srcs), want, opts.Alignment)
}

// TestBudgetCountsContextOverhead: the budget is the driver's free memory
// less the headroom, so a context's own memory (here most of the device)
// makes a staging ErrBudget before anything is allocated. Before, the
// budget was 90% of the total and the same staging failed in the driver.
func TestBudgetCountsContextOverhead(t *testing.T) {
	const mib = 1 << 20
	h := newHarness(t, smallOpts(), func(fc *fakeControl) {
		fc.configure(1, 64*mib)
		fc.setOverhead(56 * mib) // 8 MiB free, 6.4 MiB of it headroom
	})
	h.needFake(t)
	srcs, _ := makeSources(rand.New(rand.NewPCG(9, 9)), 5000) // one 2 MiB granule
	if _, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{}); !errors.Is(err, ErrBudget) {
		t.Fatalf("Stage into the headroom: %v, want ErrBudget", err)
	}
	h.expectCalls(t, "cuMemCreate", 0)
}

// TestStageDriverFailures injects a failure (one that leaves the context
// usable) into each driver call a staging makes, for both handovers: the
// error surfaces as a *DriverError naming the call, nothing stays
// allocated, mapped, reserved or counted, and the next Stage works.
func TestStageDriverFailures(t *testing.T) {
	for _, tc := range []struct {
		call  string
		after int
		ipc   bool
	}{
		{"cuDevicePrimaryCtxRetain", 0, false},
		{"cuStreamCreate", 1, false},
		{"cuEventCreate", 2, false},
		{"cuMemGetAllocationGranularity", 0, false},
		{"cuMemHostAlloc", 1, false},
		{"cuMemGetInfo_v2", 0, false},
		{"cuMemCreate", 0, false},
		{"cuMemAddressReserve", 0, false},
		{"cuMemMap", 0, false},
		{"cuMemSetAccess", 0, false},
		{"cuMemAlloc_v2", 0, true},
		{"cuMemcpyHtoDAsync_v2", 0, false},
		{"cuMemcpyHtoDAsync_v2", 3, true},
		{"cuEventRecord", 2, false},
		{"cuEventSynchronize", 1, false},
		{"cuIpcGetMemHandle", 0, true},
	} {
		t.Run(tc.call, func(t *testing.T) {
			opts := smallOpts()
			h := newHarness(t, opts, func(fc *fakeControl) {
				if tc.ipc {
					fc.setNoVMM()
				}
			})
			h.needFake(t)
			h.fc.fail(tc.call, cudaErrorUnknown, tc.after, 1)
			rng := rand.New(rand.NewPCG(2, uint64(tc.after)))
			srcs, _ := makeSources(rng, 30000, 100, 9000)
			_, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
			asDriverError(t, err, tc.call, cudaErrorUnknown)
			h.expectLive(t, map[string]int64{"alloc": 0, "phys": 0, "violations": 0})
			if n := h.leased(t, 0); n != 0 {
				t.Errorf("LeasedBytes = %d after a failed Stage", n)
			}
			srcs, want := makeSources(rng, 30000, 100, 9000)
			verify(t, h, h.stage(t, 0, srcs), want, opts.Alignment)
		})
	}
}

func TestStageReaderErrorFreesEverything(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		err     error
		wantErr error
	}{
		{"error", boom, boom},
		{"short read", io.EOF, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := smallOpts()
			h := newHarness(t, opts, nil)
			rng := rand.New(rand.NewPCG(3, 3))
			srcs, _ := makeSources(rng, 20000, 20000)
			data := make([]byte, 50000)
			// Fails in the middle of the lease, pieces after good ones.
			srcs = append(srcs, Source{Name: "bad", R: &failingReader{data: data, failAt: 30000, err: tc.err}, Off: 1000, Len: 40000})
			_, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Stage error %v, want %v", err, tc.wantErr)
			}
			var se *SourceError
			if !errors.As(err, &se) || se.Name != "bad" {
				t.Fatalf("error %v is not a *SourceError for \"bad\"", err)
			}
			h.expectLive(t, map[string]int64{"alloc": 0, "violations": 0})
			if n := h.leased(t, 0); n != 0 {
				t.Errorf("LeasedBytes = %d", n)
			}
			srcs, want := makeSources(rng, 20000)
			l, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			verify(t, h, l, want, opts.Alignment)
			h.expectCalls(t, "cuMemHostAlloc", int64(opts.PinnedBuffers))
		})
	}
}

// TestStageCancelFreesEverything cancels a staging while one of its reads
// is blocked. Stage must return without waiting for the reader and free the
// device memory at once; the blocked piece keeps its pinned buffer until the
// reader returns, and the copier keeps working meanwhile.
func TestStageCancelFreesEverything(t *testing.T) {
	opts := smallOpts()
	h := newHarness(t, opts, nil)
	rng := rand.New(rand.NewPCG(4, 4))
	data := make([]byte, 40000)
	fillRandom(rng, data)
	g := newGatedReader(data, 20000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := h.c.Stage(ctx, 0, []Source{{Name: "slow", R: g, Len: int64(len(data))}}, StageOptions{})
		errc <- err
	}()
	<-g.entered
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Stage error %v, want context.Canceled", err)
	}
	// The reader is still blocked here.
	h.expectLive(t, map[string]int64{"alloc": 0, "violations": 0})
	if n := h.leased(t, 0); n != 0 {
		t.Errorf("LeasedBytes = %d", n)
	}
	srcs, want := makeSources(rng, 30000)
	l, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatalf("Stage while a cancelled reader is blocked: %v", err)
	}
	verify(t, h, l, want, opts.Alignment)
	close(g.release)
	// Cleanup's Close waits for the orphaned piece and checks the pool.
}

func TestStageCancelledBeforeStart(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srcs, _ := makeSources(rand.New(rand.NewPCG(5, 5)), 100)
	if _, err := h.c.Stage(ctx, 0, srcs, StageOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stage error %v", err)
	}
	h.expectCalls(t, "cuMemAlloc_v2", 0)
}

func TestBudget(t *testing.T) {
	const gran = 2 << 20
	opts := smallOpts()
	opts.DeviceBudget = gran // one lease
	h := newHarness(t, opts, nil)
	rng := rand.New(rand.NewPCG(6, 6))
	srcs, want := makeSources(rng, 6000)
	l, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srcs2, want2 := makeSources(rng, 3000, 3000)
	if _, err := h.c.Stage(context.Background(), 0, srcs2, StageOptions{}); !errors.Is(err, ErrBudget) {
		t.Fatalf("Stage over budget: %v, want ErrBudget", err)
	}
	if _, err := h.c.Bench(context.Background(), 0, 5000); !errors.Is(err, ErrBudget) {
		t.Fatalf("Bench over budget: %v, want ErrBudget", err)
	}
	h.expectCalls(t, "cuMemCreate", 1) // refused before allocating
	h.expectCalls(t, "cuMemAlloc_v2", 0)
	if n := h.leased(t, 0); n != gran {
		t.Errorf("LeasedBytes = %d, want %d", n, gran)
	}
	verify(t, h, l, want, opts.Alignment)
	if err := h.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	l2, err := h.c.Stage(context.Background(), 0, srcs2, StageOptions{})
	if err != nil {
		t.Fatalf("Stage after Release: %v", err)
	}
	verify(t, h, l2, want2, opts.Alignment)
}

func TestBadRequests(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	ctx := context.Background()
	srcs, _ := makeSources(rand.New(rand.NewPCG(7, 7)), 10)
	for name, s := range map[string][]Source{
		"no sources":   nil,
		"nil reader":   {{Name: "x", Len: 1}},
		"negative len": {{Name: "x", R: srcs[0].R, Len: -1}},
		"negative off": {{Name: "x", R: srcs[0].R, Off: -1, Len: 1}},
		"all empty":    {{Name: "x", R: srcs[0].R}},
	} {
		if _, err := h.c.Stage(ctx, 0, s, StageOptions{}); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", name, err)
		}
	}
	for _, dev := range []int{-1, 1} {
		if _, err := h.c.Stage(ctx, dev, srcs, StageOptions{}); !errors.Is(err, ErrBadDevice) {
			t.Errorf("device %d: %v, want ErrBadDevice", dev, err)
		}
	}
	l, err := h.c.Stage(ctx, 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := l.Bytes // rounded up to the granularity: all of it reads back
	for _, r := range []struct{ off, n int64 }{{-1, 1}, {0, b + 1}, {b, 1}, {b + 1, 0}} {
		if err := h.c.ReadBack(ctx, l.ID, r.off, make([]byte, r.n)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ReadBack(%d, %d bytes): %v, want ErrBadRequest", r.off, r.n, err)
		}
	}
	if _, err := h.c.Bench(ctx, 0, 0); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Bench(0 bytes): %v", err)
	}
}

func TestOpenUnavailable(t *testing.T) {
	if fakeLib == "" {
		t.Skip("needs the fake driver")
	}
	check := func(t *testing.T, c *Copier, want error) {
		t.Helper()
		if c.Available() {
			t.Fatal("Available() = true")
		}
		_, err := c.Stage(context.Background(), 0, nil, StageOptions{})
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, want) {
			t.Fatalf("Stage: %v, want ErrUnavailable and %v", err, want)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("missing library", func(t *testing.T) {
		c, err := Open(Options{DriverPath: "/nonexistent/libcuda.so.1"})
		if err != nil {
			t.Fatal(err)
		}
		check(t, c, ErrUnavailable)
	})
	t.Run("not a driver", func(t *testing.T) {
		c, err := Open(Options{DriverPath: "libm.so.6"})
		if err != nil {
			t.Fatal(err)
		}
		check(t, c, ErrUnavailable)
	})
	for _, tc := range []struct {
		name  string
		setup func(*fakeControl)
		code  int
	}{
		{"cuInit fails", func(fc *fakeControl) { fc.fail("cuInit", cudaErrorUnknown, 0, 1) }, cudaErrorUnknown},
		{"no devices", func(fc *fakeControl) { fc.configure(0, 0) }, cudaErrorNoDevice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir() + "/libfakecuda.so"
			lib, err := os.ReadFile(fakeLib)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, lib, 0o755); err != nil {
				t.Fatal(err)
			}
			fc, err := openFakeControl(path)
			if err != nil {
				t.Fatal(err)
			}
			tc.setup(fc)
			c, err := Open(Options{DriverPath: path})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Devices()
			asDriverError(t, err, "cuInit", tc.code)
			check(t, c, ErrUnavailable)
		})
	}
}
