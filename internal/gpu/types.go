package gpu

import (
	"io"
	"slices"
	"time"
)

// Handover is how a lease's device memory reaches its consumer.
type Handover int

const (
	// HandoverAuto is HandoverFD where the device supports it, else
	// HandoverIPC.
	HandoverAuto Handover = iota
	// HandoverFD allocates with the virtual memory management API
	// (cuMemCreate) and hands the consumer a POSIX file descriptor
	// (Copier.ExportFD) to import with cuMemImportFromShareableHandle.
	// The consumer then holds its own reference to the physical memory:
	// the lease ending, or hubproxy exiting, never takes it away.
	HandoverFD
	// HandoverIPC is the legacy path, for devices or drivers without VMM:
	// cuMemAlloc and a CUipcMemHandle for cuIpcOpenMemHandle. The memory
	// is hubproxy's: when the lease ends it is freed, whether or not a
	// consumer still maps it, so the consumer must hold or renew the lease
	// for as long as it uses the memory. It needs the consumer to see
	// hubproxy's process (a shared PID namespace) and the same GPU.
	HandoverIPC
)

func (h Handover) String() string {
	switch h {
	case HandoverFD:
		return "fd"
	case HandoverIPC:
		return "ipc"
	}
	return "auto"
}

// ParseHandover reads "auto" (or ""), "fd" or "ipc".
func ParseHandover(s string) (Handover, bool) {
	switch s {
	case "", "auto":
		return HandoverAuto, true
	case "fd":
		return HandoverFD, true
	case "ipc":
		return HandoverIPC, true
	}
	return HandoverAuto, false
}

// Health is a device's state as the copier sees it.
type Health string

const (
	// HealthOK: the device stages.
	HealthOK Health = "ok"
	// HealthRecovering (Options.ResetOnFault only): a sticky fault (an
	// asynchronous error such as 700 or an uncorrectable ECC error) killed
	// the device's context; its leases are dropped and the context is
	// being reset. Stagings on it fail with ErrDeviceFailed until it is
	// back.
	HealthRecovering Health = "recovering"
	// HealthFailed: a sticky fault killed the device's context, and it
	// stays out of service until the process restarts (Options.OnFatal);
	// or, with ResetOnFault, the reset or the re-attach after it failed
	// and the next call that needs the device tries again.
	HealthFailed Health = "failed"
)

// Device describes one CUDA device as the copier sees it.
type Device struct {
	Index int // the driver's ordinal in this process; differs between containers
	Name  string
	// UUID ("GPU-…") and PCIBusID ("0000:3b:00.0") name the device the same
	// way in every process, whatever CUDA_VISIBLE_DEVICES says there.
	UUID     string
	PCIBusID string
	NUMANode int // host NUMA node closest to the device; -1 if unknown
	// Handover is what HandoverAuto gives on this device: HandoverFD where
	// the driver supports VMM allocations with POSIX file descriptor
	// handles, HandoverIPC otherwise.
	Handover Handover
	// GPUDirectRDMA: its HandoverFD leases are allocated GPUDirect RDMA
	// capable, so a consumer can register them with a NIC.
	GPUDirectRDMA bool
	// GranularityBytes is what allocations are rounded up to (0 until the
	// device is first used).
	GranularityBytes int64
	TotalBytes       int64
	FreeBytes        int64 // from cuMemGetInfo; -1 until the copier has used the device, or if the query fails (see Copier.Devices)
	HeadroomBytes    int64 // free device memory staging always leaves to others
	BudgetBytes      int64 // what leases could hold now: LeasedBytes plus what FreeBytes allows, capped by Options.DeviceBudget
	LeasedBytes      int64 // bytes held by live leases, stagings in progress, and memory the copier could not free (until Close)
	Health           Health
	Faults           int64  // sticky faults seen on the device
	Recoveries       int64  // context resets that brought it back
	LastError        string // the last sticky fault, or why recovery failed
}

// Source is one tensor's bytes: Len bytes of R starting at Off. The stager
// reads them with ReadAt, in pieces and concurrently; the cache's lazy
// handle implements io.ReaderAt and blocks until its bytes are present.
type Source struct {
	Name string
	R    io.ReaderAt
	Off  int64
	Len  int64
}

// Placement is where a source landed inside its lease's allocation.
type Placement struct {
	Name   string
	Offset int64 // from the allocation's base; a multiple of Options.Alignment
	Len    int64
}

// StageOptions says how a lease is handed over and how long it lives.
type StageOptions struct {
	Handover Handover
	// Hold makes a lease that never expires: it ends only with Release
	// (the admin API calls it when the consumer's socket closes). Without
	// it the lease expires after Options.LeaseTTL unless renewed.
	Hold bool
}

// Lease is device memory staged for a consumer: one allocation of Bytes
// bytes (a multiple of the device's allocation granularity), each source
// at its Placement in the order given to Stage; every other byte is zero.
//
// A HandoverFD lease is handed over with ExportFD; the consumer's import
// outlives the lease. A HandoverIPC lease is handed over with IPCHandle,
// and the consumer must be done with its mapping before the lease ends.
type Lease struct {
	ID         string
	Device     int
	DeviceUUID string
	Bytes      int64
	Placements []Placement
	Handover   Handover // HandoverFD or HandoverIPC, never HandoverAuto
	IPCHandle  []byte   // HandoverIPC only: 64 bytes, a CUipcMemHandle for cuIpcOpenMemHandle
	// GPUDirectRDMA: a HandoverFD lease allocated with
	// allocFlags.gpuDirectRDMACapable, which a consumer may register with a
	// NIC (ibv_reg_dmabuf_mr and the like).
	GPUDirectRDMA bool
	Held          bool // StageOptions.Hold: no expiry
	Expires       time.Time
	Elapsed       time.Duration // wall time Stage took, reads included
}

// clone returns a copy that shares no slices with l.
func (l Lease) clone() Lease {
	l.Placements = slices.Clone(l.Placements)
	l.IPCHandle = slices.Clone(l.IPCHandle)
	return l
}
