package gpu

// allocation is device memory the copier allocated and no lease holds.
type allocation struct {
	dev   *devState
	dptr  uint64
	bytes int64 // counted against dev's budget
}

// dispose frees an allocation that nothing uses any more (a released or
// expired lease, a failed staging, a finished Bench) and returns its bytes
// to the budget. settled says whether every copy into it is known to have
// finished.
//
// An allocation that is not settled, or whose free fails, is stranded
// instead: kept for Close, its bytes still counted. Freeing memory a copy
// may still write is undefined, and a failed cuMemFree leaves the memory
// with the driver, so handing its bytes to the next staging would let the
// budget promise memory the device does not have.
func (c *Copier) dispose(a allocation, settled bool) error {
	if !settled {
		c.strand(a)
		return nil
	}
	if err := c.drv.free(a.dev.index, a.dptr); err != nil {
		c.strand(a)
		return err
	}
	c.unreserve(a.dev, a.bytes)
	return nil
}

func (c *Copier) strand(a allocation) {
	c.mu.Lock()
	c.stranded = append(c.stranded, a)
	c.mu.Unlock()
	c.opts.Logger.Warn("gpu: device memory not freed; it stays counted against the budget",
		"device", a.dev.index, "bytes", a.bytes)
}
