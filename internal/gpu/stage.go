package gpu

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Stage copies srcs onto device as one lease. The sources are packed, in
// order, into a single device allocation at Options.Alignment offsets, so
// one handle covers them all and the consumer finds each tensor at its
// Placement from the imported base. The allocation is rounded up to the
// device's granularity and every byte not in a source is zeroed, so the
// consumer's mapping shows nothing but this lease's tensors. Reads run
// concurrently, several per pinned buffer, overlapped with the
// host-to-device copies of earlier buffers on several streams. Stage
// returns once every byte is on the device.
//
// opts.Handover picks the allocation: HandoverAuto is HandoverFD where the
// device supports it (Device.Handover), else HandoverIPC.
//
// On any failure (a source read, a driver call, the budget, ctx, or Close)
// everything Stage allocated is freed and no lease exists; only device
// memory that the driver fails to free, or that a copy the driver could
// not confirm finished may still write, is kept, counted against the
// budget, until Close. If ctx ends while a reader is blocked, Stage
// returns at once and frees the device memory; the reader's goroutine
// finishes in the background and gives its pinned buffer back when the
// reader returns. Until then the device's pool is short of that buffer,
// so readers must not block forever (the cache's handles return when
// their own request context ends).
//
// Errors: ErrBadRequest, ErrBadDevice, ErrBudget, ErrDeviceFailed,
// *SourceError, *DriverError, ctx's error, ErrClosed, or ErrUnavailable.
func (c *Copier) Stage(ctx context.Context, device int, srcs []Source, opts StageOptions) (*Lease, error) {
	start := time.Now() // Elapsed measures the machine, so not c.clock
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	pl, end, err := layout(srcs, c.opts.Alignment)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(c.life, func() { cancel(ErrClosed) })()

	d, done, err := c.use(device)
	if err != nil {
		return nil, err
	}
	defer done()
	defer c.abortOnFault(d, cancel)()
	kind := opts.Handover
	switch {
	case kind == HandoverAuto:
		kind = d.handover()
	case kind == HandoverFD && !d.id.vmm:
		return nil, fmt.Errorf("%w: device %d has no VMM allocations with file descriptor handles; use the IPC handover", ErrBadRequest, device)
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	a, err := c.allocate(d, roundUp(end, d.gran.Load()), kind)
	if err != nil {
		return nil, err
	}
	handle, settled, err := c.fillAndExport(ctx, d, a, fillFrom(srcs, pl))
	if err != nil {
		if ferr := c.dispose(a, settled); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return nil, err
	}
	l := &lease{
		dev:   d,
		alloc: a,
		pub: Lease{
			ID:         newLeaseID(),
			Device:     device,
			DeviceUUID: d.id.uuid,
			Bytes:      a.bytes,
			Placements: pl,
			Handover:   kind,
			IPCHandle:  handle,
			// vmmAlloc sets the flag wherever the device offers it.
			GPUDirectRDMA: kind == HandoverFD && d.id.rdma,
			Held:          opts.Hold,
			Elapsed:       time.Since(start),
		},
	}
	pub := c.addLease(l)
	return &pub, nil
}

// fillAndExport copies the image, zeros after the last source included,
// and for the legacy path exports the allocation's IPC handle (a VMM
// allocation is exported on demand, by ExportFD). settled is pump's:
// whether every copy into the allocation is known to be done.
func (c *Copier) fillAndExport(ctx context.Context, d *devState, a allocation, fill fillFunc) (handle []byte, settled bool, err error) {
	if settled, err := c.pump(ctx, d, a.dptr, a.bytes, fill); err != nil {
		return nil, settled, err
	}
	if a.kind == HandoverIPC {
		handle, err = c.drv.ipcHandle(d.index, a.dptr)
	}
	return handle, true, err
}
