package gpu

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// BenchResult compares the two ways of moving host bytes to a device.
type BenchResult struct {
	Device       int
	Bytes        int64         // bytes each method copied
	Pinned       time.Duration // the staging pipeline: pinned pool, cuMemcpyHtoDAsync on Options.Streams streams
	Pageable     time.Duration // cuMemcpyHtoD_v2 from malloc'd memory, one BufferSize piece at a time, until its last DMA is done
	PinnedGBps   float64       // Bytes / Pinned, in 10^9 bytes per second
	PageableGBps float64       // Bytes / Pageable, in 10^9 bytes per second
}

// Speedup is PinnedGBps / PageableGBps, or 0 when either is unknown.
func (r BenchResult) Speedup() float64 {
	if r.PinnedGBps == 0 || r.PageableGBps == 0 {
		return 0
	}
	return r.PinnedGBps / r.PageableGBps
}

// Bench measures host-to-device bandwidth on device with size bytes: once
// through the same pipeline Stage uses (but without readers, so it is the
// copy ceiling), once from pageable memory. Each method gets one untimed
// BufferSize warm-up copy first. The device memory counts against the
// budget while Bench runs and is freed before it returns (or kept until
// Close, like Stage's, if that cannot be done safely). Bench shares the
// device's pinned pool with concurrent stagings onto it, which slows both.
func (c *Copier) Bench(ctx context.Context, device int, size int64) (BenchResult, error) {
	if err := c.enter(); err != nil {
		return BenchResult{}, err
	}
	defer c.leave()
	if size <= 0 {
		return BenchResult{}, fmt.Errorf("%w: bench size %d", ErrBadRequest, size)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(c.life, func() { cancel(ErrClosed) })()
	d, done, err := c.use(device)
	if err != nil {
		return BenchResult{}, err
	}
	defer done()
	defer c.abortOnFault(d, cancel)()
	a, err := c.allocate(d, roundUp(size, d.gran.Load()), HandoverIPC)
	if err != nil {
		return BenchResult{}, err
	}
	r, settled, err := c.bench(ctx, d, a.dptr, size)
	if ferr := c.dispose(a, settled); ferr != nil {
		err = errors.Join(err, ferr)
	}
	return r, err
}

// bench runs both measurements into the allocation at dptr. settled is
// false if a pump left copies into dptr unconfirmed. The timings use the
// system clock, not Copier.clock: they measure the machine.
//
// A pageable cuMemcpyHtoD returns once the driver has copied the source
// into its own staging memory, before the DMA from there has finished, so
// the pageable timer stops only after cuCtxSynchronize: without it the
// figure counts the last piece's DMA as free, and the memory could be
// freed under it.
func (c *Copier) bench(ctx context.Context, d *devState, dptr uint64, size int64) (r BenchResult, settled bool, err error) {
	dev := d.index
	r = BenchResult{Device: dev, Bytes: size}
	noFill := func(context.Context, []byte, int64) error { return nil }
	piece := min(size, c.opts.BufferSize)
	if settled, err := c.pump(ctx, d, dptr, piece, noFill); err != nil {
		return r, settled, err
	}
	start := time.Now()
	if settled, err := c.pump(ctx, d, dptr, size, noFill); err != nil {
		return r, settled, err
	}
	r.Pinned = time.Since(start)

	buf, err := c.drv.pageable(piece)
	if err != nil {
		return r, true, err
	}
	defer c.drv.freePageable(buf)
	clear(buf) // fault the pages in before timing
	if err := c.drv.copyToDevice(dev, dptr, buf); err != nil {
		return r, c.drv.syncDevice(dev) == nil, err
	}
	if err := c.drv.syncDevice(dev); err != nil {
		return r, false, err
	}
	start = time.Now()
	for off := int64(0); off < size; off += piece {
		err := ctx.Err()
		if err == nil {
			err = c.drv.copyToDevice(dev, dptr+uint64(off), buf[:min(piece, size-off)])
		} else {
			err = context.Cause(ctx)
		}
		if err != nil {
			return r, c.drv.syncDevice(dev) == nil, err
		}
	}
	if err := c.drv.syncDevice(dev); err != nil {
		return r, false, err
	}
	r.Pageable = time.Since(start)
	r.PinnedGBps = gbps(size, r.Pinned)
	r.PageableGBps = gbps(size, r.Pageable)
	return r, true, nil
}

func gbps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds() / 1e9
}
