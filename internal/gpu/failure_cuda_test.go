//go:build cuda && cgo && linux

package gpu

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"testing"
)

// TestStageOutOfMemory: see outOfDeviceMemory.
func TestStageOutOfMemory(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	h.needFake(t)
	h.fc.fail("cuMemCreate", cudaErrorOutOfMemory, 0, 1)
	outOfDeviceMemory(t, h.c, h)
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
// allocated, mapped, reserved or counted, and the next Stage works
// (failedStageCleansUp).
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
			h := newHarness(t, smallOpts(), func(fc *fakeControl) {
				if tc.ipc {
					fc.setNoVMM()
				}
			})
			h.needFake(t)
			h.fc.fail(tc.call, cudaErrorUnknown, tc.after, 1)
			failedStageCleansUp(t, h.c, h, tc.call)
		})
	}
}

// TestStageReaderErrorFreesEverything: see readerErrorsCleanUp.
func TestStageReaderErrorFreesEverything(t *testing.T) {
	readerErrorsCleanUp(t, func(t *testing.T) (*Copier, driverView) {
		h := newHarness(t, smallOpts(), nil)
		return h.c, h
	})
}

// TestStageCancelFreesEverything: see cancelCleansUp.
func TestStageCancelFreesEverything(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	cancelCleansUp(t, h.c, h)
}

// TestStageCancelledBeforeStart: see cancelledBeforeAllocating.
func TestStageCancelledBeforeStart(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	cancelledBeforeAllocating(t, h.c, h)
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
	h.verify(t, l, want)
	if err := h.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	l2, err := h.c.Stage(context.Background(), 0, srcs2, StageOptions{})
	if err != nil {
		t.Fatalf("Stage after Release: %v", err)
	}
	h.verify(t, l2, want2)
}

// TestBadRequests: see badRequests.
func TestBadRequests(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	badRequests(t, h.c, h)
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
