package gpu

import (
	"context"
	"math/rand/v2"
	"testing"
)

// TestDevicesReportsDriverMemory: Devices lists every device without
// creating contexts; once one is used, FreeBytes is what the driver
// reports, allocation granularity included, and LeasedBytes what the
// leases hold.
func TestDevicesReportsDriverMemory(t *testing.T) {
	const total, gran = 1 << 30, 2 << 20
	r := newRig(t, smallOpts(), fakeConfig{devices: 2, total: total, granularity: gran})
	ds, err := r.c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[1].Name != "Go Fake Device 1" || ds[1].TotalBytes != total ||
		ds[1].BudgetBytes != total/100*90 || ds[1].FreeBytes != -1 || ds[1].LeasedBytes != 0 {
		t.Fatalf("Devices = %+v", ds)
	}
	srcs, want := makeSources(rand.New(rand.NewPCG(3, 3)), 7000, 3)
	l, err := r.c.Stage(context.Background(), 1, srcs)
	if err != nil {
		t.Fatal(err)
	}
	if l.Device != 1 {
		t.Errorf("lease on device %d", l.Device)
	}
	r.verify(t, l, want)
	ds, err = r.c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if ds[1].FreeBytes != total-gran || ds[1].LeasedBytes != l.Bytes || ds[0].FreeBytes != -1 {
		t.Errorf("after staging %d bytes on device 1: %+v", l.Bytes, ds)
	}
	r.expectCount(t, "attach", 1) // only the device in use got a context
}

// TestDevicesListsADeadDevice: once a device's context has died of a
// sticky fault, Devices still lists every device, with the dead one's
// FreeBytes unknown (-1). Before, the failing cuMemGetInfo made Devices,
// and so the admin listing, fail for all of them.
func TestDevicesListsADeadDevice(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{devices: 2})
	rng := rand.New(rand.NewPCG(4, 4))
	for dev := range 2 {
		srcs, _ := makeSources(rng, 5000)
		if _, err := r.c.Stage(context.Background(), dev, srcs); err != nil {
			t.Fatal(err)
		}
	}
	r.drv.inject(fakeFault{method: "alloc", dev: 0, code: cudaErrorIllegalAddress, sticky: true})
	srcs, _ := makeSources(rng, 5000)
	if _, err := r.c.Stage(context.Background(), 0, srcs); err == nil {
		t.Fatal("Stage succeeded through the fault")
	}
	ds, err := r.c.Devices()
	if err != nil {
		t.Fatalf("Devices with one dead device: %v", err)
	}
	if ds[0].FreeBytes != -1 || ds[0].LeasedBytes == 0 || ds[1].FreeBytes <= 0 {
		t.Errorf("Devices = %+v, want device 0 unknown but still leased, device 1 known", ds)
	}
	onlyCode(t, "Close", r.c.Close(), cudaErrorIllegalAddress)
}
