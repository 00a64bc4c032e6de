//go:build cuda && cgo && linux

package gpu

import (
	"context"
	"math/rand/v2"
	"testing"
)

// TestStageRoundTrip: see stageRoundTrip; every copy is from pinned
// memory, and the pool is still pinned after the leases are released.
func TestStageRoundTrip(t *testing.T) {
	opts := smallOpts()
	h := newHarness(t, opts, nil)
	stageRoundTrip(t, h.c, h)
	h.expectCalls(t, "pageable_async", 0)
	h.expectLive(t, map[string]int64{"host": int64(opts.PinnedBuffers)})
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
	h.verifyAligned(t, l, want, DefaultAlignment)
	h.expectCalls(t, "cuMemHostAlloc", DefaultPinnedBuffers)
}

// TestPinnedBuffersAllocatedOnce: see poolPinnedOnce, on one device; its
// streams and events, like its buffers, are made once.
func TestPinnedBuffersAllocatedOnce(t *testing.T) {
	opts := smallOpts()
	h := newHarness(t, opts, nil)
	h.needFake(t)
	poolPinnedOnce(t, h.c, h, 1)
	h.expectCalls(t, "cuStreamCreate", int64(opts.Streams))
	h.expectCalls(t, "cuEventCreate", int64(opts.PinnedBuffers))
}

// TestConcurrentStages: see stageConcurrently; here the asynchronous
// copies are slow, so that a buffer reused before its copy finished shows.
func TestConcurrentStages(t *testing.T) {
	h := newHarness(t, sharedPoolOpts(), func(fc *fakeControl) { fc.setCopyDelay(200) })
	stageConcurrently(t, h.c, h)
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
	h.verify(t, l, want)
	ds, _ = h.c.Devices()
	if ds[1].FreeBytes != total-gran || ds[1].LeasedBytes != gran || ds[1].GranularityBytes != gran || ds[0].FreeBytes != -1 {
		t.Errorf("after staging on device 1: %+v", ds)
	}
	// Only the device in use got a context.
	h.expectCalls(t, "cuDevicePrimaryCtxRetain", 1)
}
