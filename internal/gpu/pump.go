package gpu

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// fillFunc writes the bytes [off, off+len(dst)) of an allocation's image
// into dst, a pinned buffer. It runs concurrently for different pieces.
type fillFunc func(ctx context.Context, dst []byte, off int64) error

// pump copies the image [0, total) of the allocation at dptr on d, one
// Options.BufferSize piece per pinned buffer of d's pool. For each piece a
// goroutine holding a buffer fills it (reads from the sources, with up to
// Options.ReadersPerPiece reads at once: see fillPiece), enqueues
// cuMemcpyHtoDAsync on the buffer's stream, records the buffer's event and
// waits on it before the buffer goes back to the pool: so while earlier
// pieces are on the bus, later ones are being read, and a buffer is never
// overwritten while a copy from it may still be running. The number of
// pieces in flight is bounded by the pool, shared by every staging onto d.
//
// The first error (a fill, a driver call, the pool, or ctx) cancels the
// rest. When pump returns settled, no copy into dptr is in flight and none
// will be issued, so the caller may free it at once, even while some fill
// goroutines are still blocked in readers that do not honour ctx; those
// skip their copy when they return and then give their buffer back
// (Copier.fills and devState.fills track them). Unsettled means a failed copy's stream could
// not be drained: a copy into dptr may still be queued, so it must not be
// freed (see dispose).
func (c *Copier) pump(ctx context.Context, d *devState, dptr uint64, total int64, fill fillFunc) (settled bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	gate := &copyGate{}
	var pieces sync.WaitGroup
	for off := int64(0); off < total; off += c.opts.BufferSize {
		b, err := d.pool.get(ctx)
		if err != nil {
			cancel(err) // a no-op if ctx is done: its cause is the result
			break
		}
		n := min(c.opts.BufferSize, total-off)
		pieces.Add(1)
		c.fills.Add(1)
		d.fills.Add(1)
		go func() {
			defer c.fills.Done()
			defer d.fills.Done()
			defer pieces.Done()
			if err := c.piece(ctx, gate, d, dptr+uint64(off), b, b.mem[:n], off, fill); err != nil {
				cancel(err)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		pieces.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	gate.shut()
	return !gate.unsettled.Load(), context.Cause(ctx)
}

// piece fills one pinned buffer and copies it to dst. The buffer is given
// back only once no copy from it can be running.
func (c *Copier) piece(ctx context.Context, gate *copyGate, d *devState, dst uint64, b *pinned, mem []byte, off int64, fill fillFunc) (err error) {
	dev := d.index
	retire := false
	defer func() {
		if retire {
			d.pool.retire(b)
		} else {
			d.pool.put(b)
		}
	}()
	if ctx.Err() != nil {
		return nil
	}
	if err := c.fillPiece(ctx, fill, mem, off); err != nil {
		return err
	}
	if !gate.enter() {
		return nil // pump gave up; dst may already be freed
	}
	defer gate.leave()
	if ctx.Err() != nil {
		return nil
	}
	stream := b.idx % c.opts.Streams
	if err := c.drv.copyAsync(dev, stream, dst, mem); err != nil {
		return err // nothing was queued
	}
	err = c.drv.record(dev, b.idx, stream)
	if err == nil {
		err = c.drv.wait(dev, b.idx)
	}
	if err == nil {
		return nil
	}
	// The copy is queued and nothing has confirmed it finished: drain the
	// stream before the buffer or the allocation is reused.
	if serr := c.drv.syncStream(dev, stream); serr != nil {
		// Still unconfirmed. Retire the buffer rather than refill it under
		// a copy that may still read it, and keep dptr from being freed
		// under a copy that may still write it.
		retire = true
		gate.unsettled.Store(true)
		return errors.Join(err, serr)
	}
	return err
}

// fillPiece fills one buffer with up to Options.ReadersPerPiece reads at
// once, each of at least minReadSize bytes. One read per buffer leaves a
// lazily filled source (the cache, fetching upstream) with one request in
// flight per buffer; several keep more of the link and the disk busy. It
// returns once every read has, with the first error.
func (c *Copier) fillPiece(ctx context.Context, fill fillFunc, mem []byte, off int64) error {
	parts := min(int64(c.opts.ReadersPerPiece), int64(len(mem))/minReadSize)
	if parts <= 1 {
		return fill(ctx, mem, off)
	}
	step := alignUp((int64(len(mem))+parts-1)/parts, c.opts.Alignment)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for i := range parts {
		lo, hi := i*step, min((i+1)*step, int64(len(mem)))
		if lo >= hi {
			break
		}
		wg.Go(func() { errs[i] = fill(ctx, mem[lo:hi], off+lo) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// copyGate lets pump stop new copies into an allocation and wait for those
// already issued, without waiting for fills still inside readers.
type copyGate struct {
	mu     sync.Mutex
	closed bool // guarded by mu; no copy may start once set
	copies sync.WaitGroup
	// unsettled is set when a failed copy's stream could not be drained.
	unsettled atomic.Bool
}

// enter reports whether a copy may start; if so, leave must follow.
func (g *copyGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.copies.Add(1)
	return true
}

func (g *copyGate) leave() { g.copies.Done() }

// shut forbids new copies and waits for those in flight.
func (g *copyGate) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.copies.Wait()
}
