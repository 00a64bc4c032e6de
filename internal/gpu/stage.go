package gpu

import (
	"context"
	"errors"
	"time"
)

// Stage copies srcs onto device as one lease. The sources are packed, in
// order, into a single device allocation (cuMemAlloc of the packed size) at
// Options.Alignment offsets, so one IPC handle covers them all and the
// consumer finds each tensor at its Placement from the imported base. Reads
// run concurrently, one goroutine per pinned buffer, overlapped with the
// host-to-device copies of earlier buffers on several streams. Stage returns
// once every byte is on the device.
//
// On any failure (a source read, a driver call, the budget, ctx, or Close)
// everything Stage allocated is freed and no lease exists; only device
// memory that the driver fails to free, or that a copy the driver could
// not confirm finished may still write, is kept, counted against the
// budget, until Close. If ctx ends while
// a reader is blocked, Stage returns at once and frees the device memory;
// the reader's goroutine finishes in the background and gives its pinned
// buffer back when the reader returns. Until then the shared pool is short
// of that buffer, so readers must not block forever (the cache's handles
// return when their own request context ends).
//
// Errors: ErrBadRequest, ErrBadDevice, ErrBudget, *SourceError,
// *DriverError, ctx's error, ErrClosed, or ErrUnavailable.
func (c *Copier) Stage(ctx context.Context, device int, srcs []Source) (*Lease, error) {
	start := time.Now() // Elapsed measures the machine, so not c.clock
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	pl, total, err := layout(srcs, c.opts.Alignment)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(c.life, func() { cancel(ErrClosed) })()

	d, err := c.device(device)
	if err != nil {
		return nil, err
	}
	if err := c.reserve(d, total); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		c.unreserve(d, total)
		return nil, context.Cause(ctx)
	}
	dptr, err := c.drv.alloc(device, total)
	if err != nil {
		c.unreserve(d, total)
		return nil, err
	}
	handle, settled, err := c.fillAndExport(ctx, device, dptr, total, fillFrom(srcs, pl))
	if err != nil {
		if ferr := c.dispose(allocation{dev: d, dptr: dptr, bytes: total}, settled); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return nil, err
	}
	l := &lease{
		dev:  d,
		dptr: dptr,
		pub: Lease{
			ID:         newLeaseID(),
			Device:     device,
			Bytes:      total,
			Placements: pl,
			IPCHandle:  handle,
			Elapsed:    time.Since(start),
		},
	}
	pub := c.addLease(l)
	return &pub, nil
}

// fillAndExport copies the image and exports the allocation's IPC handle.
// settled is pump's: whether every copy into dptr is known to be done.
func (c *Copier) fillAndExport(ctx context.Context, dev int, dptr uint64, total int64, fill fillFunc) (handle []byte, settled bool, err error) {
	if settled, err := c.pump(ctx, dev, dptr, total, fill); err != nil {
		return nil, settled, err
	}
	handle, err = c.drv.ipcHandle(dev, dptr)
	return handle, true, err
}
