package gpu

import (
	"context"
	"errors"
	"sync"
)

// pool is the fixed set of pinned host buffers all stagings share. The
// buffers are allocated once, on first use of any device, and freed by
// Close: pinning is expensive (page locking, an IOMMU mapping), and
// allocating per copy forfeits most of what pinned memory buys. They are
// allocated portable, so copies to any device's streams may use them.
type pool struct {
	n int
	// idle holds the buffers nobody is filling or copying from. A holder
	// returns its buffer only after the copy from it has completed.
	idle chan *pinned

	mu sync.Mutex
	// Guarded by mu.
	bufs []*pinned
	dev  int // device whose context allocated bufs; frees use it too
}

// pinned is one pinned staging buffer. idx also selects the buffer's event
// on every device and, modulo Options.Streams, its stream.
type pinned struct {
	idx int
	mem []byte // C memory from driver.hostAlloc
}

func newPool(n int) *pool { return &pool{n: n, idle: make(chan *pinned, n)} }

// ensure allocates the buffers, in dev's context, if they are not yet
// allocated. A failure frees what was allocated so that a later call can
// try again.
func (p *pool) ensure(drv driver, dev int, size int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bufs != nil {
		return nil
	}
	bufs := make([]*pinned, 0, p.n)
	for i := range p.n {
		mem, err := drv.hostAlloc(dev, size)
		if err != nil {
			for _, b := range bufs {
				_ = drv.hostFree(dev, b.mem)
			}
			return err
		}
		bufs = append(bufs, &pinned{idx: i, mem: mem})
	}
	p.bufs, p.dev = bufs, dev
	for _, b := range bufs {
		p.idle <- b
	}
	return nil
}

// get waits for a free buffer.
func (p *pool) get(ctx context.Context) (*pinned, error) {
	select {
	case b := <-p.idle:
		return b, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// put returns a buffer whose last copy has completed.
func (p *pool) put(b *pinned) { p.idle <- b }

// free releases the buffers. The caller guarantees none is held.
func (p *pool) free(drv driver) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, b := range p.bufs {
		errs = append(errs, drv.hostFree(p.dev, b.mem))
	}
	p.bufs = nil
	for len(p.idle) > 0 {
		<-p.idle
	}
	return errors.Join(errs...)
}
