package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Copier stages tensors onto CUDA devices. It is safe for concurrent use.
//
// NB lock order: devState.attachMu before pool.mu; lease.mu before
// Copier.mu. Copier.mu is a leaf: nothing else is locked under it. No lock
// is held across a pipeline wait or a reader call.
type Copier struct {
	// Immutable after Open.
	opts   Options
	drv    driver // nil when unavailable
	reason error  // why drv is nil; wraps ErrUnavailable
	clock  clock  // lease expiry; the system clock outside tests
	devs   []*devState
	pool   *pool
	// life is the copier's lifetime: Close cancels it, which aborts stagings
	// in progress and stops the reaper.
	life       context.Context
	stop       context.CancelFunc
	kick       chan struct{} // wakes the reaper when the earliest expiry may have changed
	reaperDone chan struct{}

	// ops counts public calls in progress. Add is only called under mu
	// while !closed, so Close's Wait cannot miss one.
	ops sync.WaitGroup
	// fills counts pipeline goroutines, including those an aborted Stage left
	// blocked in a reader; each holds a pinned buffer, so Close frees the pool
	// only after they are done.
	fills sync.WaitGroup

	mu sync.Mutex
	// Guarded by mu.
	closed bool
	leases map[string]*lease
	// stranded is device memory no lease holds that could not be freed
	// safely (see dispose); Close frees it.
	stranded []allocation
}

// devState is the copier's view of one device.
type devState struct {
	// Immutable after Open.
	index  int
	name   string
	total  int64
	budget int64

	// attachMu serialises attaching (context, streams, events). attached is
	// set under it and read without it.
	attachMu sync.Mutex
	attached atomic.Bool

	// Guarded by Copier.mu. Bytes of live leases, of stagings and Bench
	// runs in progress, and of stranded allocations: the driver may still
	// hold those, so the budget keeps counting them.
	leased int64
}

// Open loads the driver library named by opts.DriverPath and initialises
// CUDA. It fails only for invalid options: when CUDA cannot be used (no
// cuda build tag, library missing, cuInit failing, no devices) it returns a
// Copier whose Available is false and whose calls all return an error
// wrapping ErrUnavailable and the reason. Device contexts, streams and the
// pinned buffers are created on first use of a device, not here.
func Open(opts Options) (*Copier, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	drv, err := openDriver(opts.DriverPath)
	if err != nil {
		return &Copier{opts: opts, reason: err}, nil
	}
	return newCopier(opts, drv, systemClock{}), nil
}

// newCopier builds a copier over a loaded and initialised driver. opts has
// its defaults filled in. Tests call it with a fake driver and clock.
func newCopier(opts Options, drv driver, clk clock) *Copier {
	n := drv.deviceCount()
	if n == 0 {
		return &Copier{opts: opts, reason: fmt.Errorf("%w: no CUDA devices", ErrUnavailable)}
	}
	devs := make([]*devState, n)
	for i := range devs {
		name, err := drv.deviceName(i)
		if err == nil {
			devs[i] = &devState{index: i, name: name}
			devs[i].total, err = drv.deviceTotal(i)
		}
		if err != nil {
			return &Copier{opts: opts, reason: fmt.Errorf("%w: device %d: %w", ErrUnavailable, i, err)}
		}
		devs[i].budget = opts.DeviceBudget
		if devs[i].budget == 0 {
			devs[i].budget = devs[i].total / 100 * defaultBudgetPercent
		}
	}
	life, stop := context.WithCancel(context.Background())
	c := &Copier{
		opts:       opts,
		drv:        drv,
		clock:      clk,
		devs:       devs,
		pool:       newPool(opts.PinnedBuffers),
		life:       life,
		stop:       stop,
		kick:       make(chan struct{}, 1),
		reaperDone: make(chan struct{}),
		leases:     make(map[string]*lease),
	}
	go c.reap()
	return c
}

// Available reports whether the copier can stage onto a GPU.
func (c *Copier) Available() bool { return c.drv != nil }

// enter admits a public call; every successful enter is paired with leave.
func (c *Copier) enter() error {
	if c.drv == nil {
		return c.reason
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.ops.Add(1)
	return nil
}

func (c *Copier) leave() { c.ops.Done() }

// Devices lists the driver's devices. FreeBytes is -1 for a device the
// copier has not used yet: cuMemGetInfo needs a context on the device, and
// creating one just to list it would cost device memory on every GPU. It
// is -1 too where cuMemGetInfo fails, as it does on every call once a
// device's context has died of an asynchronous fault: the listing is what
// an operator looks at then, so one bad device must not take it down.
func (c *Copier) Devices() ([]Device, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	out := make([]Device, len(c.devs))
	for i, d := range c.devs {
		out[i] = Device{Index: i, Name: d.name, TotalBytes: d.total, FreeBytes: -1, BudgetBytes: d.budget}
		if d.attached.Load() {
			free, _, err := c.drv.memInfo(i)
			if err != nil {
				// Debug: listings are polled, and the stagings on the
				// device report the same failure where it matters.
				c.opts.Logger.Debug("gpu: cuMemGetInfo failed", "device", i, "err", err)
				continue
			}
			out[i].FreeBytes = free
		}
	}
	c.mu.Lock()
	for i, d := range c.devs {
		out[i].LeasedBytes = d.leased
	}
	c.mu.Unlock()
	return out, nil
}

// device validates dev and makes it ready for copies: its context, streams
// and events, and the shared pinned pool.
func (c *Copier) device(dev int) (*devState, error) {
	if dev < 0 || dev >= len(c.devs) {
		return nil, fmt.Errorf("%w: %d (the driver reports %d)", ErrBadDevice, dev, len(c.devs))
	}
	d := c.devs[dev]
	d.attachMu.Lock()
	defer d.attachMu.Unlock()
	if !d.attached.Load() {
		// One event per pinned buffer: the buffer's holder records it after
		// its copy and waits on it before giving the buffer back.
		if err := c.drv.attach(dev, c.opts.Streams, c.opts.PinnedBuffers); err != nil {
			return nil, err
		}
		d.attached.Store(true)
	}
	if err := c.pool.ensure(c.drv, dev, c.opts.BufferSize); err != nil {
		return nil, err
	}
	return d, nil
}

// reserve counts n bytes against d's budget, or returns ErrBudget.
func (c *Copier) reserve(d *devState, n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.leased+n > d.budget {
		return fmt.Errorf("%w: device %d: %d bytes requested, %d of %d leased",
			ErrBudget, d.index, n, d.leased, d.budget)
	}
	d.leased += n
	return nil
}

func (c *Copier) unreserve(d *devState, n int64) {
	c.mu.Lock()
	d.leased -= n
	c.mu.Unlock()
}

// Close frees every lease, the pinned buffers, streams, events and device
// contexts. Stagings in progress are aborted and fail with ErrClosed. Close
// waits for readers that an aborted Stage left blocked (they still hold
// pinned buffers), so a reader that never returns blocks Close. The driver
// library stays loaded: libcuda does not support being unloaded. Close is
// idempotent.
func (c *Copier) Close() error {
	if c.drv == nil {
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.stop()
	<-c.reaperDone
	c.ops.Wait()
	c.fills.Wait()

	// Nothing runs now but what the driver still has queued: copies whose
	// stream could not be drained when they failed. Drain every stream
	// first, so that no memory is freed under a copy.
	var errs []error
	for i, d := range c.devs {
		if d.attached.Load() {
			for s := range c.opts.Streams {
				errs = append(errs, c.drv.syncStream(i, s))
			}
		}
	}
	c.mu.Lock()
	ls := make([]*lease, 0, len(c.leases))
	for id, l := range c.leases {
		ls = append(ls, l)
		delete(c.leases, id)
	}
	stranded := c.stranded
	c.stranded = nil
	c.mu.Unlock()
	for _, l := range ls {
		errs = append(errs, c.freeLease(l))
	}
	// Stranded memory gets one more try now that its copies are drained.
	// A free that fails again is only reported: detach below ends the
	// context, and with it everything allocated in it.
	for _, a := range stranded {
		if err := c.drv.free(a.dev.index, a.dptr); err != nil {
			errs = append(errs, err)
			continue
		}
		c.unreserve(a.dev, a.bytes)
	}
	errs = append(errs, c.pool.free(c.drv))
	for i, d := range c.devs {
		if d.attached.Load() {
			errs = append(errs, c.drv.detach(i))
			d.attached.Store(false)
		}
	}
	return errors.Join(errs...)
}
