package gpu

import (
	"fmt"
	"math"
)

// allocation is device memory the copier allocated: a lease's, a
// staging's in progress, or Bench's.
type allocation struct {
	dev   *devState
	kind  Handover // HandoverFD: a VMM allocation (mem); HandoverIPC: cuMemAlloc (dptr)
	dptr  uint64
	mem   vmem
	bytes int64  // counted against dev's budget
	epoch uint64 // dev.epoch when it was reserved
}

// allocate admits n bytes on d (see budgetLocked) and allocates them. The
// check and the allocation run under d.allocMu, so that the free memory
// one staging was admitted against is not counted again by the next.
//
// n is rounded up to the device's granularity by the caller: for a VMM
// allocation the driver requires it, and for the legacy allocator it is
// what keeps a lease alone in its underlying block, since a CUipcMemHandle
// shares the whole block, neighbours included.
func (c *Copier) allocate(d *devState, n int64, kind Handover) (allocation, error) {
	d.allocMu.Lock()
	defer d.allocMu.Unlock()
	free, _, err := c.drv.memInfo(d.index)
	if err != nil {
		return allocation{}, err
	}
	c.mu.Lock()
	budget := c.budgetLocked(d, free)
	if d.leased+n > budget {
		err = fmt.Errorf("%w: device %d: %d bytes requested, %d leased, %d free of which %d are headroom, cap %d",
			ErrBudget, d.index, n, d.leased, free, d.headroom, c.opts.DeviceBudget)
	} else {
		d.leased += n
	}
	epoch := d.epoch
	c.mu.Unlock()
	if err != nil {
		return allocation{}, err
	}
	a := allocation{dev: d, kind: kind, bytes: n, epoch: epoch}
	if kind == HandoverFD {
		a.mem, err = c.drv.vmmAlloc(d.index, n)
		a.dptr = a.mem.ptr
	} else {
		a.dptr, err = c.drv.alloc(d.index, n)
	}
	if err != nil {
		c.unreserve(d, n)
		return allocation{}, err
	}
	return a, nil
}

// budgetLocked is what d's leases may hold in all: what they hold plus
// the driver's free memory less the headroom, capped by DeviceBudget.
// The driver's figure already counts what the budget used to miss:
// allocation granularity, context overheads and the inference process's
// own memory. free is -1 when unknown. Called with c.mu held.
func (c *Copier) budgetLocked(d *devState, free int64) int64 {
	budget := int64(math.MaxInt64)
	if free >= 0 {
		budget = d.leased + max(0, free-d.headroom)
	} else if c.opts.DeviceBudget == 0 {
		budget = d.total - d.headroom
	}
	if c.opts.DeviceBudget > 0 {
		budget = min(budget, c.opts.DeviceBudget)
	}
	return budget
}

func (c *Copier) unreserve(d *devState, n int64) {
	c.mu.Lock()
	d.leased -= n
	c.mu.Unlock()
}
