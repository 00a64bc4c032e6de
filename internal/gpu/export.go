package gpu

import (
	"fmt"
	"os"
)

// ExportFD returns a new file descriptor for a HandoverFD lease's memory
// (cuMemExportToShareableHandle), for the admin API to pass to the
// consumer over its Unix socket (SCM_RIGHTS). The caller closes it once
// sent. The consumer imports it with cuMemImportFromShareableHandle, maps
// Lease.Bytes bytes and sets access on its device; from then on it holds
// its own reference to the physical memory, which outlives the lease,
// hubproxy and any restart of it. The descriptor itself is a reference
// too (cuMemExportToShareableHandle, cuMemRelease): one that is never
// imported keeps the whole allocation on the device, after the lease ends
// and after hubproxy exits, until every copy of it is closed. So the
// consumer must close it on every path, imported or not, error or not.
//
// Errors: ErrUnknownLease, ErrBadRequest for a HandoverIPC lease,
// ErrDeviceFailed, *DriverError, ErrClosed, ErrUnavailable.
func (c *Copier) ExportFD(id string) (*os.File, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	l, err := c.live(id)
	if err != nil {
		return nil, err
	}
	if l.alloc.kind != HandoverFD {
		return nil, fmt.Errorf("%w: lease %q is handed over by IPC handle, not by file descriptor", ErrBadRequest, id)
	}
	_, done, err := c.use(l.pub.Device)
	if err != nil {
		return nil, err
	}
	defer done()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.freed {
		return nil, fmt.Errorf("%w: %q", ErrUnknownLease, id)
	}
	fd, err := c.drv.exportFD(l.pub.Device, l.alloc.mem)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "cuda-vmm-"+id), nil
}
