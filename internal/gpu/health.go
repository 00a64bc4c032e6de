package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// A sticky fault (an illegal address, a failed launch, an uncorrectable
// ECC error, a contained error: see DriverError.Sticky) kills the CUDA
// context it happens in: everything queued in it is dropped and every
// later call in it fails the same way. CUDA documents one recovery: end the
// process and start a new one. So by default the copier takes the device
// out of service for good:
//
//  1. fault marks the device failed, the moment any driver call on it
//     reports a sticky code (faultWatch sees every one), and aborts the
//     stagings on it. Calls on the device from then on fail with
//     ErrDeviceFailed; no call resets it.
//  2. retire waits for the calls already using the device, and for its
//     pipeline goroutines, to finish (they fail fast: the context is
//     dead), drops its leases and stranded memory, which died with the
//     context, and calls Options.OnFatal once, so that `hubproxy serve`
//     exits non-zero and its supervisor restarts it. A consumer that
//     imported a HandoverFD lease keeps its memory: its import is a
//     reference of its own, in its own context, and outlives the exporter.
//
// With Options.ResetOnFault the device is instead marked recovering and
// recover, after the same drain and drop, resets the primary context and
// attaches again (context, streams, events, a fresh pinned pool); a device
// whose reset or re-attach fails is HealthFailed and the next call that
// needs it tries again. Devices reports health, faults and recoveries per
// device.

// fault is faultWatch's report of a sticky error on dev.
func (c *Copier) fault(dev int, de *DriverError) {
	if dev < 0 || dev >= len(c.devs) {
		return
	}
	d := c.devs[dev]
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.health != HealthOK {
		return // one fault, many calls failing with it
	}
	d.faults++
	d.lastErr = de
	d.abort(fmt.Errorf("%w: device %d: %w", ErrDeviceFailed, dev, de))
	if !c.opts.ResetOnFault {
		c.opts.Logger.Error("gpu: sticky fault; the device is out of service, its leases are dropped, and hubproxy must be restarted (CUDA allows no recovery in process)",
			"device", dev, "uuid", d.id.uuid, "err", de)
		d.health = HealthFailed
		c.ops.Add(1)
		go c.retire(d, fmt.Errorf("gpu: device %d (%s): sticky fault %w: the process must restart", dev, d.id.uuid, de))
		return
	}
	c.opts.Logger.Error("gpu: sticky fault; the device's context is reset and its leases dropped",
		"device", dev, "uuid", d.id.uuid, "err", de)
	c.recoverLocked(d)
}

// retire drains d after a sticky fault, drops what its context held and
// reports the process's end (OnFatal), once per Copier.
func (c *Copier) retire(d *devState, err error) {
	defer c.ops.Done()
	d.users.Wait()
	d.fills.Wait()
	dropped := c.drop(d)
	d.retired.Store(true)
	c.opts.Logger.Error("gpu: device drained after a sticky fault", "device", d.index, "leases_dropped", dropped)
	c.fatal.Do(func() {
		if c.opts.OnFatal != nil {
			c.opts.OnFatal(err)
		}
	})
}

// recoverLocked starts a recovery of d. Called with c.mu held.
func (c *Copier) recoverLocked(d *devState) {
	if c.closed {
		// Close tears the context down itself; no new one is wanted.
		d.health = HealthFailed
		return
	}
	d.health = HealthRecovering
	d.recovered = make(chan struct{})
	c.ops.Add(1)
	go c.recover(d, d.recovered)
}

func (c *Copier) recover(d *devState, done chan struct{}) {
	defer c.ops.Done()
	defer close(done)
	d.users.Wait()
	d.fills.Wait()
	dropped := c.drop(d)
	err := c.reset(d)
	if err == nil {
		err = c.attach(d)
	}
	c.mu.Lock()
	if err != nil {
		d.health, d.lastErr = HealthFailed, err
	} else {
		d.health = HealthOK
		d.recoveries++
		d.life, d.abort = context.WithCancelCause(context.Background())
	}
	c.mu.Unlock()
	if err != nil {
		c.opts.Logger.Error("gpu: device recovery failed; the next staging on it tries again", "device", d.index, "err", err)
		return
	}
	c.opts.Logger.Warn("gpu: device recovered with a fresh context", "device", d.index, "leases_dropped", dropped)
}

// drop forgets everything d's dead context held: its leases (gone for
// every call from now on), its stranded memory, its budget count.
func (c *Copier) drop(d *devState) int {
	c.mu.Lock()
	var gone []*lease
	for id, l := range c.leases {
		if l.dev == d {
			gone = append(gone, l)
			delete(c.leases, id)
		}
	}
	c.stranded = slices.DeleteFunc(c.stranded, func(a allocation) bool { return a.dev == d })
	d.leased = 0
	d.epoch++
	c.mu.Unlock()
	for _, l := range gone {
		l.mu.Lock()
		l.freed = true
		l.mu.Unlock()
	}
	return len(gone)
}

// reset destroys d's context and everything in it, and leaves d detached.
func (c *Copier) reset(d *devState) error {
	d.attachMu.Lock()
	defer d.attachMu.Unlock()
	var err error
	if d.attached.Load() {
		err = c.drv.reset(d.index)
	}
	// The pool's buffers were pinned in the context: the reset took them.
	d.pool.forget()
	d.attached.Store(false)
	d.gran.Store(0)
	return err
}

// faultWatch is the driver as the copier uses it: every call goes through,
// and an error with a sticky code is reported (to Copier.fault) on its way
// back to the caller, wherever in the copier the call was made.
type faultWatch struct {
	driver
	report func(dev int, de *DriverError)
}

func (w *faultWatch) check(dev int, err error) error {
	var de *DriverError
	if errors.As(err, &de) && de.Sticky() {
		w.report(dev, de)
	}
	return err
}

func (w *faultWatch) attach(dev, streams, events int) error {
	return w.check(dev, w.driver.attach(dev, streams, events))
}

func (w *faultWatch) memInfo(dev int) (int64, int64, error) {
	free, total, err := w.driver.memInfo(dev)
	return free, total, w.check(dev, err)
}

func (w *faultWatch) granularity(dev int) (int64, error) {
	g, err := w.driver.granularity(dev)
	return g, w.check(dev, err)
}

func (w *faultWatch) alloc(dev int, n int64) (uint64, error) {
	p, err := w.driver.alloc(dev, n)
	return p, w.check(dev, err)
}

func (w *faultWatch) free(dev int, p uint64) error { return w.check(dev, w.driver.free(dev, p)) }

func (w *faultWatch) ipcHandle(dev int, p uint64) ([]byte, error) {
	h, err := w.driver.ipcHandle(dev, p)
	return h, w.check(dev, err)
}

func (w *faultWatch) vmmAlloc(dev int, n int64) (vmem, error) {
	m, err := w.driver.vmmAlloc(dev, n)
	return m, w.check(dev, err)
}

func (w *faultWatch) vmmFree(dev int, m vmem) error { return w.check(dev, w.driver.vmmFree(dev, m)) }

func (w *faultWatch) exportFD(dev int, m vmem) (int, error) {
	fd, err := w.driver.exportFD(dev, m)
	return fd, w.check(dev, err)
}

func (w *faultWatch) hostAlloc(dev int, n int64, node int) ([]byte, error) {
	b, err := w.driver.hostAlloc(dev, n, node)
	return b, w.check(dev, err)
}

func (w *faultWatch) hostFree(dev int, b []byte) error {
	return w.check(dev, w.driver.hostFree(dev, b))
}

func (w *faultWatch) copyAsync(dev, stream int, dst uint64, src []byte) error {
	return w.check(dev, w.driver.copyAsync(dev, stream, dst, src))
}

func (w *faultWatch) record(dev, event, stream int) error {
	return w.check(dev, w.driver.record(dev, event, stream))
}

func (w *faultWatch) wait(dev, event int) error { return w.check(dev, w.driver.wait(dev, event)) }

func (w *faultWatch) syncStream(dev, stream int) error {
	return w.check(dev, w.driver.syncStream(dev, stream))
}

func (w *faultWatch) syncDevice(dev int) error { return w.check(dev, w.driver.syncDevice(dev)) }

func (w *faultWatch) copyToHost(dev int, dst []byte, src uint64) error {
	return w.check(dev, w.driver.copyToHost(dev, dst, src))
}

func (w *faultWatch) copyToDevice(dev int, dst uint64, src []byte) error {
	return w.check(dev, w.driver.copyToDevice(dev, dst, src))
}
