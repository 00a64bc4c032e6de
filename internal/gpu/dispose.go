package gpu

// dispose frees an allocation that nothing uses any more (a released or
// expired lease, a failed staging, a finished Bench) and returns its bytes
// to the budget. settled says whether every copy into it is known to have
// finished.
//
// An allocation that is not settled, or whose free fails, is stranded
// instead: kept for Close, its bytes still counted. Freeing memory a copy
// may still write is undefined, and a failed free leaves the memory with
// the driver, so handing its bytes to the next staging would let the
// budget promise memory the device does not have.
//
// On a device that is being reset, or was reset since a was made, there is
// nothing to do: the reset freed everything in the old context and the
// recovery zeroed its count. (Freeing a's address in the new context could
// free another lease's memory there.)
func (c *Copier) dispose(a allocation, settled bool) error {
	done, err := c.hold(a.dev, false)
	if err != nil {
		return nil
	}
	defer done()
	c.mu.Lock()
	stale := a.epoch != a.dev.epoch
	c.mu.Unlock()
	if stale {
		return nil
	}
	if !settled {
		c.strand(a)
		return nil
	}
	if err := c.release(a); err != nil {
		c.strand(a)
		return err
	}
	c.unreserve(a.dev, a.bytes)
	return nil
}

// release frees a's memory in the driver. For a VMM allocation that only
// drops hubproxy's mapping and reference: a consumer that imported it
// keeps the physical memory until it releases its own.
func (c *Copier) release(a allocation) error {
	if a.kind == HandoverFD {
		return c.drv.vmmFree(a.dev.index, a.mem)
	}
	return c.drv.free(a.dev.index, a.dptr)
}

func (c *Copier) strand(a allocation) {
	c.mu.Lock()
	c.stranded = append(c.stranded, a)
	c.mu.Unlock()
	c.opts.Logger.Warn("gpu: device memory not freed; it stays counted against the budget",
		"device", a.dev.index, "bytes", a.bytes)
}
