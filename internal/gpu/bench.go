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
	Pageable     time.Duration // cuMemcpyHtoD_v2 from malloc'd memory, one BufferSize piece at a time
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
// budget while Bench runs and is freed before it returns. Bench shares the
// pinned pool with concurrent stagings, which slows both.
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
	d, err := c.device(device)
	if err != nil {
		return BenchResult{}, err
	}
	if err := c.reserve(d, size); err != nil {
		return BenchResult{}, err
	}
	defer c.unreserve(d, size)
	dptr, err := c.drv.alloc(device, size)
	if err != nil {
		return BenchResult{}, err
	}
	r, err := c.bench(ctx, device, dptr, size)
	if ferr := c.drv.free(device, dptr); ferr != nil {
		err = errors.Join(err, ferr)
	}
	return r, err
}

// bench runs both measurements into the allocation at dptr.
func (c *Copier) bench(ctx context.Context, dev int, dptr uint64, size int64) (BenchResult, error) {
	r := BenchResult{Device: dev, Bytes: size}
	noFill := func(context.Context, []byte, int64) error { return nil }
	piece := min(size, c.opts.BufferSize)
	if err := c.pump(ctx, dev, dptr, piece, noFill); err != nil {
		return r, err
	}
	start := time.Now()
	if err := c.pump(ctx, dev, dptr, size, noFill); err != nil {
		return r, err
	}
	r.Pinned = time.Since(start)

	buf, err := c.drv.pageable(piece)
	if err != nil {
		return r, err
	}
	defer c.drv.freePageable(buf)
	clear(buf) // fault the pages in before timing
	if err := c.drv.copyToDevice(dev, dptr, buf); err != nil {
		return r, err
	}
	start = time.Now()
	for off := int64(0); off < size; off += piece {
		if err := ctx.Err(); err != nil {
			return r, context.Cause(ctx)
		}
		if err := c.drv.copyToDevice(dev, dptr+uint64(off), buf[:min(piece, size-off)]); err != nil {
			return r, err
		}
	}
	r.Pageable = time.Since(start)
	r.PinnedGBps = gbps(size, r.Pinned)
	r.PageableGBps = gbps(size, r.Pageable)
	return r, nil
}

func gbps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds() / 1e9
}
