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
// NB lock order: devState.allocMu, then devState.attachMu, then pool.mu;
// lease.mu before Copier.mu. Copier.mu is a leaf: nothing else is locked
// under it. No lock is held across a pipeline wait or a reader call.
type Copier struct {
	// Immutable after Open.
	opts   Options
	drv    driver // nil when unavailable; wrapped by faultWatch otherwise
	reason error  // why drv is nil; wraps ErrUnavailable
	clock  clock  // lease expiry; the system clock outside tests
	devs   []*devState
	// life is the copier's lifetime: Close cancels it, which aborts stagings
	// in progress and stops the reaper.
	life       context.Context
	stop       context.CancelFunc
	kick       chan struct{} // wakes the reaper when the earliest expiry may have changed
	reaperDone chan struct{}
	fatal      sync.Once // OnFatal is called once

	// ops counts public calls and recoveries in progress. Add is only
	// called under mu while !closed, so Close's Wait cannot miss one.
	ops sync.WaitGroup
	// fills counts pipeline goroutines, including those an aborted Stage left
	// blocked in a reader; each holds a pinned buffer, so Close frees the
	// pools only after they are done.
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
	index    int
	name     string
	total    int64
	id       deviceID
	headroom int64
	pool     *pool // pinned buffers for this device only, on its NUMA node
	// retired: a sticky fault killed the context and it is not reset
	// (health.go): Close neither drains nor frees in it, every such call
	// would fail the same way; the process ends and the driver frees it.
	retired atomic.Bool

	// allocMu serialises the budget check with the allocation it admits,
	// so that two stagings never both count the same free memory.
	allocMu sync.Mutex
	// attachMu serialises attaching (context, streams, events, pool).
	// attached and gran are set under it and read without it.
	attachMu sync.Mutex
	attached atomic.Bool
	gran     atomic.Int64 // allocation granularity; 0 until attached

	// users counts calls using the device; fills its pipeline goroutines.
	// users.Add is only called under Copier.mu while health is HealthOK,
	// so a recovery, which sets health first, can wait for both to drain
	// before it resets the context under them.
	users sync.WaitGroup
	fills sync.WaitGroup

	// Guarded by Copier.mu.
	// leased is the bytes of live leases, of stagings and Bench runs in
	// progress, and of stranded allocations: the driver may still hold
	// those, so the budget keeps counting them.
	leased int64
	// epoch counts the device's context resets (drop): an allocation made
	// in an older epoch died with its context and is not freed again.
	epoch      uint64
	health     Health
	faults     int64
	recoveries int64
	lastErr    error
	recovered  chan struct{} // closed when the latest recovery ends
	// life ends when the device faults (its cause wraps ErrDeviceFailed),
	// aborting the stagings on it so that the recovery need not wait for
	// their readers; each recovery starts a new one.
	life  context.Context
	abort context.CancelCauseFunc
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
	drv, err := openDriver(opts.DriverPath, opts.sysfs)
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
		d, err := describe(drv, i, opts)
		if err != nil {
			return &Copier{opts: opts, reason: fmt.Errorf("%w: device %d: %w", ErrUnavailable, i, err)}
		}
		devs[i] = d
	}
	life, stop := context.WithCancel(context.Background())
	c := &Copier{
		opts:       opts,
		clock:      clk,
		devs:       devs,
		life:       life,
		stop:       stop,
		kick:       make(chan struct{}, 1),
		reaperDone: make(chan struct{}),
		leases:     make(map[string]*lease),
	}
	c.drv = &faultWatch{driver: drv, report: c.fault}
	for _, d := range devs {
		// Not derived from c.life: Close aborts stagings with ErrClosed,
		// and a second cancellation racing it would blur the cause.
		d.life, d.abort = context.WithCancelCause(context.Background())
	}
	go c.reap()
	return c
}

// describe reads what the copier needs to know of device i before using it.
func describe(drv driver, i int, opts Options) (*devState, error) {
	d := &devState{index: i, health: HealthOK, pool: newPool(opts.PinnedBuffers)}
	var err error
	if d.name, err = drv.deviceName(i); err != nil {
		return nil, err
	}
	if d.total, err = drv.deviceTotal(i); err != nil {
		return nil, err
	}
	if d.id, err = drv.identify(i); err != nil {
		return nil, err
	}
	d.headroom = opts.DeviceHeadroom
	if d.headroom == 0 {
		d.headroom = d.total / 100 * defaultHeadroomPercent
	}
	return d, nil
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
// is -1 too where cuMemGetInfo fails, or the device is not healthy: the
// listing is what an operator looks at then, so one bad device must not
// take it down.
func (c *Copier) Devices() ([]Device, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	out := make([]Device, len(c.devs))
	for i, d := range c.devs {
		out[i] = Device{Index: i, Name: d.name, UUID: d.id.uuid, PCIBusID: d.id.pciBusID, NUMANode: d.id.numaNode,
			Handover: d.handover(), GPUDirectRDMA: d.id.rdma, GranularityBytes: d.gran.Load(), TotalBytes: d.total, FreeBytes: -1, HeadroomBytes: d.headroom}
		if done, err := c.hold(d, false); err == nil {
			if d.attached.Load() {
				free, _, err := c.drv.memInfo(i)
				if err != nil {
					// Debug: listings are polled, and the stagings on the
					// device report the same failure where it matters.
					c.opts.Logger.Debug("gpu: cuMemGetInfo failed", "device", i, "err", err)
				} else {
					out[i].FreeBytes = free
				}
			}
			done()
		}
	}
	c.mu.Lock()
	for i, d := range c.devs {
		out[i].LeasedBytes = d.leased
		out[i].BudgetBytes = c.budgetLocked(d, out[i].FreeBytes)
		out[i].Health, out[i].Faults, out[i].Recoveries = d.health, d.faults, d.recoveries
		if d.lastErr != nil {
			out[i].LastError = d.lastErr.Error()
		}
	}
	c.mu.Unlock()
	return out, nil
}

// handover is what HandoverAuto means on d.
func (d *devState) handover() Handover {
	if d.id.vmm {
		return HandoverFD
	}
	return HandoverIPC
}

// use validates dev, admits a call on it (see hold) and makes it ready for
// copies: its context, streams, events, granularity and pinned pool. The
// returned func ends the use.
func (c *Copier) use(dev int) (*devState, func(), error) {
	if dev < 0 || dev >= len(c.devs) {
		return nil, nil, fmt.Errorf("%w: %d (the driver reports %d)", ErrBadDevice, dev, len(c.devs))
	}
	d := c.devs[dev]
	done, err := c.hold(d, true)
	if err != nil {
		return nil, nil, err
	}
	if err := c.attach(d); err != nil {
		done()
		return nil, nil, err
	}
	return d, done, nil
}

// hold admits a call on d while it is healthy, so that a recovery waits
// for it. With ResetOnFault, a device whose last recovery failed gets
// another one when retry is set (a call that needs the device, not a
// listing); without, a failed device stays failed.
func (c *Copier) hold(d *devState, retry bool) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.health != HealthOK {
		err := fmt.Errorf("%w: device %d is %s after %w", ErrDeviceFailed, d.index, d.health, d.lastErr)
		if retry && d.health == HealthFailed && c.opts.ResetOnFault {
			c.recoverLocked(d)
		}
		return nil, err
	}
	d.users.Add(1)
	return d.users.Done, nil
}

// abortOnFault makes a fault of d cancel ctx; the returned func undoes it.
func (c *Copier) abortOnFault(d *devState, cancel context.CancelCauseFunc) func() bool {
	c.mu.Lock()
	life := d.life
	c.mu.Unlock()
	return context.AfterFunc(life, func() { cancel(context.Cause(life)) })
}

// legacyGranularity is cuMemAlloc's block size, the granularity of a
// device without VMM.
const legacyGranularity = 2 << 20

func (c *Copier) attach(d *devState) error {
	d.attachMu.Lock()
	defer d.attachMu.Unlock()
	if !d.attached.Load() {
		// One event per pinned buffer: the buffer's holder records it after
		// its copy and waits on it before giving the buffer back.
		if err := c.drv.attach(d.index, c.opts.Streams, c.opts.PinnedBuffers); err != nil {
			return err
		}
		d.attached.Store(true)
	}
	if d.gran.Load() == 0 {
		g, err := c.drv.granularity(d.index)
		if err != nil {
			if d.id.vmm {
				return err
			}
			// cuMemGetAllocationGranularity describes VMM allocations; a
			// device without VMM may refuse it, and its leases are
			// cuMemAlloc memory, whose blocks are 2 MiB.
			c.opts.Logger.Debug("gpu: no VMM granularity; using cuMemAlloc's 2 MiB", "device", d.index, "err", err)
			g = legacyGranularity
		}
		d.gran.Store(max(g, 1))
	}
	return d.pool.ensure(c.drv, d.index, c.opts.BufferSize, d.id.numaNode)
}

// Close frees every lease, the pinned buffers, streams, events and device
// contexts. Stagings in progress are aborted and fail with ErrClosed. Close
// waits for readers that an aborted Stage left blocked (they still hold
// pinned buffers), so a reader that never returns blocks Close. A consumer
// that imported a HandoverFD lease keeps its memory; one that opened a
// HandoverIPC handle loses it. The driver library stays loaded: libcuda
// does not support being unloaded. Close is idempotent.
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
	c.ops.Wait() // recoveries too
	c.fills.Wait()

	// Nothing runs now but what the driver still has queued: copies whose
	// stream could not be drained when they failed. Drain every stream
	// first, so that no memory is freed under a copy.
	var errs []error
	for i, d := range c.devs {
		if d.attached.Load() && !d.retired.Load() {
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
		if err := c.release(a); err != nil {
			errs = append(errs, err)
			continue
		}
		c.unreserve(a.dev, a.bytes)
	}
	for i, d := range c.devs {
		switch {
		case d.retired.Load():
			d.pool.forget() // pinned in the dead context
			c.drv.detach(i) // its failure is the fault's, logged already
			d.attached.Store(false)
		case d.attached.Load():
			errs = append(errs, d.pool.free(c.drv), c.drv.detach(i))
			d.attached.Store(false)
		}
	}
	return errors.Join(errs...)
}
