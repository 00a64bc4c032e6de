package gpu

import (
	"io"
	"slices"
	"time"
)

// Device describes one CUDA device as the copier sees it.
type Device struct {
	Index       int
	Name        string
	TotalBytes  int64
	FreeBytes   int64 // from cuMemGetInfo; -1 until the copier has used the device, or if the query fails (see Copier.Devices)
	BudgetBytes int64 // Options.DeviceBudget, or 90% of TotalBytes
	LeasedBytes int64 // bytes held by live leases, stagings in progress, and memory the copier could not free (until Close)
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

// Lease is device memory staged for a consumer. The memory is one
// allocation of Bytes bytes; each source sits at its Placement, in the order
// given to Stage, and the alignment gaps between them are zero. It stays
// valid until Release or Expires, whichever comes first: the consumer must
// be done with its imported mapping by then (CUDA leaves access to freed
// IPC memory undefined).
type Lease struct {
	ID         string
	Device     int
	Bytes      int64
	Placements []Placement
	IPCHandle  []byte // 64 bytes, a CUipcMemHandle for cuIpcOpenMemHandle in the consumer
	Expires    time.Time
	Elapsed    time.Duration // wall time Stage took, reads included
}

// clone returns a copy that shares no slices with l.
func (l Lease) clone() Lease {
	l.Placements = slices.Clone(l.Placements)
	l.IPCHandle = slices.Clone(l.IPCHandle)
	return l
}
