package gpu

import (
	"context"
	"errors"
	"sync"
)

// errPoolRetired is what a staging gets when no pinned buffer is left in
// service and none could be replaced.
var errPoolRetired = errors.New("gpu: no pinned staging buffer in service: " +
	"every one was retired after a stream could not be drained")

// pool is one device's fixed set of pinned host buffers, shared by every
// staging onto it. The buffers are allocated once, on first use of the
// device, and freed by Close: pinning is expensive (page locking, an IOMMU
// mapping), and allocating per copy forfeits most of what pinned memory
// buys. They are pinned on the device's NUMA node, so that its DMA reads
// local memory rather than crossing the socket interconnect, and in the
// device's own context, so that a sticky fault elsewhere never takes them
// (a reset of this device's context does, and forget drops them then).
//
// A buffer whose copy could not be confirmed finished is retired rather
// than refilled (see Copier.piece) and replaced on a later staging.
type pool struct {
	n int
	// idle holds the buffers nobody is filling or copying from. A holder
	// returns its buffer only after the copy from it has completed.
	idle chan *pinned

	mu sync.Mutex
	// Guarded by mu.
	bufs   []*pinned // every buffer allocated, retired ones too: Close frees them all
	vacant []int     // indexes of retired buffers not yet replaced
	// drained is closed while every buffer is retired, so that get fails
	// instead of waiting for a buffer that will never come back; a
	// replacement installs a new one.
	drained chan struct{}
}

// pinned is one pinned staging buffer. idx also selects the buffer's event
// on every device and, modulo Options.Streams, its stream.
type pinned struct {
	idx int
	dev int    // device whose context allocated mem; its free uses it too
	mem []byte // pinned memory from driver.hostAlloc
}

func newPool(n int) *pool {
	return &pool{n: n, idle: make(chan *pinned, n), drained: make(chan struct{})}
}

// ensure allocates the buffers in dev's context if they are not yet
// allocated, and replaces retired ones. The first allocation is all or
// nothing, so that a later call can try again. A replacement that fails
// leaves the pool short, and is an error only when no buffer is in
// service: the staging could not run, while with fewer buffers it only
// runs slower (and a later staging, maybe on a healthier device, retries).
func (p *pool) ensure(drv driver, dev int, size int64, node int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bufs == nil {
		bufs := make([]*pinned, 0, p.n)
		for i := range p.n {
			mem, err := drv.hostAlloc(dev, size, node)
			if err != nil {
				errs := []error{err}
				for _, b := range bufs {
					errs = append(errs, drv.hostFree(dev, b.mem))
				}
				return errors.Join(errs...)
			}
			bufs = append(bufs, &pinned{idx: i, dev: dev, mem: mem})
		}
		p.bufs = bufs
		for _, b := range bufs {
			p.idle <- b
		}
		return nil
	}
	for len(p.vacant) > 0 {
		mem, err := drv.hostAlloc(dev, size, node)
		if err != nil {
			if len(p.vacant) == p.n {
				return err
			}
			return nil
		}
		last := len(p.vacant) - 1
		b := &pinned{idx: p.vacant[last], dev: dev, mem: mem}
		if len(p.vacant) == p.n {
			p.drained = make(chan struct{})
		}
		p.vacant = p.vacant[:last]
		p.bufs = append(p.bufs, b)
		p.idle <- b
	}
	return nil
}

// get waits for a free buffer.
func (p *pool) get(ctx context.Context) (*pinned, error) {
	p.mu.Lock()
	drained := p.drained
	p.mu.Unlock()
	select {
	case b := <-p.idle:
		return b, nil
	case <-drained:
		// A replacement may have arrived since drained was read.
		select {
		case b := <-p.idle:
			return b, nil
		default:
			return nil, errPoolRetired
		}
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// put returns a buffer whose last copy has completed.
func (p *pool) put(b *pinned) { p.idle <- b }

// retire takes b out of service: a copy from it may still be queued, and
// refilling it could change bytes the copy has yet to read. It stays
// allocated until free, which Close calls after draining every stream.
func (p *pool) retire(b *pinned) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.vacant = append(p.vacant, b.idx)
	if len(p.vacant) == p.n {
		close(p.drained)
	}
}

// free releases the buffers. The caller guarantees none is held.
func (p *pool) free(drv driver) error {
	p.mu.Lock()
	var errs []error
	for _, b := range p.bufs {
		errs = append(errs, drv.hostFree(b.dev, b.mem))
	}
	p.mu.Unlock()
	p.forget()
	return errors.Join(errs...)
}

// forget drops the buffers without freeing them: a context reset already
// did. The caller guarantees none is held.
func (p *pool) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bufs, p.vacant = nil, nil
	for len(p.idle) > 0 {
		<-p.idle
	}
	select {
	case <-p.drained:
		p.drained = make(chan struct{})
	default:
	}
}
