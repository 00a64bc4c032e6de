package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Devices are named across processes by UUID or PCI bus id, never by
// ordinal: an ordinal depends on each process's CUDA_VISIBLE_DEVICES and
// CUDA_DEVICE_ORDER, and a sidecar that sees every GPU numbers them
// differently from an inference container that sees one. A mismatch would
// silently map another GPU's memory (over NVLink) or fail.

// FormatUUID writes a CUuuid's 16 bytes the way nvidia-smi and
// NVIDIA_VISIBLE_DEVICES do.
func FormatUUID(b [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// NormalizePCIBusID reads a PCI bus id in any of the spellings in use
// (cuDeviceGetPCIBusId's "0000:3B:00.0", nvidia-smi's "00000000:3B:00.0",
// sysfs's "0000:3b:00.0", or without the domain) and writes it as sysfs
// does. It reports false for anything else.
func NormalizePCIBusID(s string) (string, bool) {
	parts := strings.Split(s, ":")
	var dom, bus uint64
	var rest string
	var err error
	switch len(parts) {
	case 3:
		if dom, err = strconv.ParseUint(parts[0], 16, 32); err != nil {
			return "", false
		}
		parts = parts[1:]
		fallthrough
	case 2:
		if bus, err = strconv.ParseUint(parts[0], 16, 8); err != nil {
			return "", false
		}
		rest = parts[1]
	default:
		return "", false
	}
	devfn := strings.Split(rest, ".")
	if len(devfn) != 2 {
		return "", false
	}
	dev, err1 := strconv.ParseUint(devfn[0], 16, 8)
	fn, err2 := strconv.ParseUint(devfn[1], 16, 8)
	if err1 != nil || err2 != nil || dev > 0x1f || fn > 7 {
		return "", false
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", dom, bus, dev, fn), true
}

// FindDevice returns the index of the device ref names: a decimal ordinal
// (this process's numbering), a UUID ("GPU-…", any case) or a PCI bus id.
func FindDevice(devs []Device, ref string) (int, error) {
	ref = strings.TrimSpace(ref)
	if i, err := strconv.Atoi(ref); err == nil {
		if i < 0 || i >= len(devs) {
			return 0, fmt.Errorf("%w: %d (the driver reports %d)", ErrBadDevice, i, len(devs))
		}
		return i, nil
	}
	pci, isPCI := NormalizePCIBusID(ref)
	for _, d := range devs {
		if d.UUID != "" && strings.EqualFold(d.UUID, ref) || isPCI && d.PCIBusID == pci {
			return d.Index, nil
		}
	}
	return 0, fmt.Errorf("%w: %q is not the ordinal, UUID or PCI bus id of a device this process sees", ErrBadDevice, ref)
}

// sysfsNUMANode reads the host NUMA node of a PCI device from sysfs: the
// node whose memory the device's DMA reaches without crossing sockets.
// It returns -1 where the kernel does not know (single-node machines
// report -1 too).
func sysfsNUMANode(root, pciBusID string) int {
	b, err := os.ReadFile(filepath.Join(root, "bus", "pci", "devices", pciBusID, "numa_node"))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return -1
	}
	return n
}
