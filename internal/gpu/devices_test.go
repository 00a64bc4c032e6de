package gpu

import (
	"errors"
	"math/rand/v2"
	"os"
	"testing"
)

// TestDevicesReportsDriverMemory: Devices lists every device without
// creating contexts, each named by UUID and PCI bus id; once one is used,
// FreeBytes is what the driver reports, allocation granularity included,
// and LeasedBytes what the leases hold.
func TestDevicesReportsDriverMemory(t *testing.T) {
	const total, gran = 1 << 30, 2 << 20
	r := newRig(t, smallOpts(), fakeConfig{devices: 2, total: total, granularity: gran, numa: []int{0, 1}})
	ds, err := r.c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	headroom := int64(total / 100 * 10)
	if len(ds) != 2 || ds[1].Name != "Go Fake Device 1" || ds[1].TotalBytes != total || ds[1].HeadroomBytes != headroom ||
		ds[1].BudgetBytes != total-headroom || ds[1].FreeBytes != -1 || ds[1].LeasedBytes != 0 || ds[1].Health != HealthOK {
		t.Fatalf("Devices = %+v", ds)
	}
	for i, d := range ds {
		if d.UUID != fakeUUID(i) || d.PCIBusID != fakePCI(i) || d.NUMANode != i || d.Handover != HandoverFD {
			t.Errorf("device %d: UUID %q, PCI %q, node %d, handover %v", i, d.UUID, d.PCIBusID, d.NUMANode, d.Handover)
		}
	}
	srcs, want := makeSources(rand.New(rand.NewPCG(3, 3)), 7000, 3)
	l := r.stage(t, 1, srcs)
	if l.Device != 1 || l.DeviceUUID != fakeUUID(1) || l.Bytes != gran {
		t.Errorf("lease on device %d (%s), %d bytes", l.Device, l.DeviceUUID, l.Bytes)
	}
	r.verify(t, l, want)
	ds, err = r.c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if ds[1].FreeBytes != total-gran || ds[1].LeasedBytes != l.Bytes || ds[1].GranularityBytes != gran || ds[0].FreeBytes != -1 {
		t.Errorf("after staging %d bytes on device 1: %+v", l.Bytes, ds)
	}
	if ds[1].BudgetBytes != l.Bytes+total-gran-headroom {
		t.Errorf("BudgetBytes = %d, want the lease plus free less headroom", ds[1].BudgetBytes)
	}
	r.expectCount(t, "attach", 1) // only the device in use got a context
}

// TestFindDevice: a device is found by this process's ordinal, by UUID in
// any case, and by its PCI bus id in every spelling in use (the driver's,
// nvidia-smi's, sysfs's); anything else is ErrBadDevice, never a guess.
func TestFindDevice(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{devices: 3})
	ds, err := r.c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	pci := ds[2].PCIBusID // 0000:38:00.0
	for ref, want := range map[string]int{
		"1": 1, ds[2].UUID: 2, " " + ds[1].UUID + " ": 1, "gpu-" + ds[2].UUID[4:]: 2,
		pci: 2, "00000000:38:00.0": 2, "0000:38:00.0": 2, "38:00.0": 2, "0000:38:0.0": 2,
	} {
		got, err := FindDevice(ds, ref)
		if err != nil || got != want {
			t.Errorf("FindDevice(%q) = %d, %v, want %d", ref, got, err, want)
		}
	}
	for _, ref := range []string{"3", "-1", "GPU-00000000-0000-0000-0000-000000000000", "0000:99:00.0", "", "cuda:0", "0000:38:00.9"} {
		if got, err := FindDevice(ds, ref); !errors.Is(err, ErrBadDevice) {
			t.Errorf("FindDevice(%q) = %d, %v, want ErrBadDevice", ref, got, err)
		}
	}
}

func TestNormalizePCIBusID(t *testing.T) {
	for in, want := range map[string]string{
		"0000:3B:00.0": "0000:3b:00.0", "00000000:3B:00.0": "0000:3b:00.0", "3b:00.0": "0000:3b:00.0",
		"0001:c1:1f.7": "0001:c1:1f.7",
	} {
		if got, ok := NormalizePCIBusID(in); !ok || got != want {
			t.Errorf("NormalizePCIBusID(%q) = %q, %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "3b", "0000:3b:00", "0000:3b:20.0", "zz:00.0", "0000:3b:00.0.0", "1:2:3:4.0"} {
		if got, ok := NormalizePCIBusID(in); ok {
			t.Errorf("NormalizePCIBusID(%q) = %q, want false", in, got)
		}
	}
}

func TestFormatUUID(t *testing.T) {
	b := [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}
	if got, want := FormatUUID(b), "GPU-12345678-9abc-def0-0102-030405060708"; got != want {
		t.Errorf("FormatUUID = %q, want %q", got, want)
	}
}

// TestSysfsNUMANode reads numa_node as the kernel writes it, and -1 for a
// device it does not know or a node it does not know (-1 in the file).
func TestSysfsNUMANode(t *testing.T) {
	root := t.TempDir()
	write := func(id, content string) {
		dir := root + "/bus/pci/devices/" + id
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/numa_node", []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("0000:3b:00.0", "1\n")
	write("0000:5e:00.0", "-1\n")
	for id, want := range map[string]int{"0000:3b:00.0": 1, "0000:5e:00.0": -1, "0000:99:00.0": -1} {
		if got := sysfsNUMANode(root, id); got != want {
			t.Errorf("sysfsNUMANode(%s) = %d, want %d", id, got, want)
		}
	}
}
