//go:build cuda && cgo && linux

package gpu

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
)

func TestStageRoundTrip(t *testing.T) {
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
	h := newHarness(t, opts, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srcs, want := makeSources(rng, tc.sizes...)
			l, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
			if err != nil {
				t.Fatalf("Stage: %v", err)
			}
			verify(t, h, l, want, opts.Alignment)
			if err := h.c.Release(l.ID); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	}
	// One device allocation per lease, every copy from pinned memory, and
	// the pool pinned once however many stagings ran.
	h.expectCalls(t, "cuMemCreate", int64(len(cases)))
	h.expectCalls(t, "pageable_async", 0)
	h.expectCalls(t, "cuMemHostAlloc", int64(opts.PinnedBuffers))
	h.expectLive(t, map[string]int64{"alloc": 0, "host": int64(opts.PinnedBuffers), "violations": 0})
}

func TestStageLargeDefaultBuffers(t *testing.T) {
	// The defaults, with a tensor spanning a few 64 MiB buffers, on a
	// fake device big enough for it.
	h := newHarness(t, Options{}, func(fc *fakeControl) { fc.configure(1, 1<<30) })
	srcs, want := makeSources(rand.New(rand.NewPCG(3, 4)), 150<<20+3, 5)
	l, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	verify(t, h, l, want, DefaultAlignment)
	h.expectCalls(t, "cuMemHostAlloc", DefaultPinnedBuffers)
}

func TestPinnedBuffersAllocatedOnce(t *testing.T) {
	opts := smallOpts()
	h := newHarness(t, opts, nil)
	h.needFake(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 8 {
		srcs, want := makeSources(rng, int64(i)*5000+1, 300)
		l, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		verify(t, h, l, want, opts.Alignment)
	}
	if _, err := h.c.Bench(context.Background(), 0, 50000); err != nil {
		t.Fatal(err)
	}
	h.expectCalls(t, "cuMemHostAlloc", int64(opts.PinnedBuffers))
	h.expectCalls(t, "cuStreamCreate", int64(opts.Streams))
	h.expectCalls(t, "cuEventCreate", int64(opts.PinnedBuffers))
	h.expectCalls(t, "cuDevicePrimaryCtxRetain", 1)
}

// TestConcurrentStages runs stagings from several goroutines over a pool
// smaller than their demand, with slow asynchronous copies: a buffer
// reused before its copy finished, or a piece landing in another lease,
// shows up as wrong bytes.
func TestConcurrentStages(t *testing.T) {
	opts := Options{PinnedBuffers: 2, BufferSize: 1024, Streams: 2, Alignment: 64}
	h := newHarness(t, opts, func(fc *fakeControl) { fc.setCopyDelay(200) })
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
				l, err := h.c.Stage(context.Background(), 0, srcs, StageOptions{})
				if err != nil {
					t.Errorf("worker %d: Stage: %v", w, err)
					return
				}
				verify(t, h, l, want, opts.Alignment)
				if err := h.c.Release(l.ID); err != nil {
					t.Errorf("worker %d: Release: %v", w, err)
				}
			}
		})
	}
	wg.Wait()
	h.expectCalls(t, "cuMemHostAlloc", int64(opts.PinnedBuffers))
	h.expectCalls(t, "cuMemCreate", workers*rounds)
	h.expectLive(t, map[string]int64{"alloc": 0, "violations": 0})
}

// TestDevices: the devices are listed without contexts, named by the
// UUID and PCI bus id the driver reports (the bus id normalised as sysfs
// writes it), with VMM as their handover; memory is the driver's figure
// once a device is used.
func TestDevices(t *testing.T) {
	const total, gran = 1 << 30, 2 << 20
	h := newHarness(t, smallOpts(), func(fc *fakeControl) { fc.configure(2, total) })
	h.needFake(t)
	ds, err := h.c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[1].Name != "Fake CUDA Device 1" || ds[1].TotalBytes != total ||
		ds[1].BudgetBytes != total-total/100*10 || ds[1].FreeBytes != -1 || ds[1].LeasedBytes != 0 {
		t.Fatalf("Devices = %+v", ds)
	}
	if d := ds[1]; d.UUID != "GPU-c0010203-0405-0607-0809-0a0b0c0d0e0f" || d.PCIBusID != "0000:3c:00.0" || d.Handover != HandoverFD {
		t.Errorf("device 1 is %q at %q, handover %v", d.UUID, d.PCIBusID, d.Handover)
	}
	if i, err := FindDevice(ds, "00000000:3C:00.0"); i != 1 || err != nil {
		t.Errorf("FindDevice by nvidia-smi's bus id = %d, %v", i, err)
	}
	srcs, want := makeSources(rand.New(rand.NewPCG(8, 9)), 7000, 3)
	l := h.stage(t, 1, srcs)
	if l.Device != 1 || l.DeviceUUID != ds[1].UUID || l.Bytes != gran {
		t.Errorf("lease on device %d (%s), %d bytes", l.Device, l.DeviceUUID, l.Bytes)
	}
	verify(t, h, l, want, 256)
	ds, _ = h.c.Devices()
	if ds[1].FreeBytes != total-gran || ds[1].LeasedBytes != gran || ds[1].GranularityBytes != gran || ds[0].FreeBytes != -1 {
		t.Errorf("after staging on device 1: %+v", ds)
	}
	// Only the device in use got a context.
	h.expectCalls(t, "cuDevicePrimaryCtxRetain", 1)
}
