package gpu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// lease is the copier's record of a Lease.
type lease struct {
	// Immutable after addLease, except pub.Expires (guarded by Copier.mu).
	pub   Lease
	dev   *devState
	alloc allocation

	// mu is held for reading while ReadBack copies from the allocation and
	// for writing while freeLease frees it.
	mu sync.RWMutex
	// Guarded by mu.
	freed bool
}

// newLeaseID returns 128 random bits in hex: ids are bearer names for
// device memory on a shared admin API, so they must not be guessable.
func newLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// addLease starts l's TTL unless it is held, registers it and returns its
// public copy.
func (c *Copier) addLease(l *lease) Lease {
	now := c.clock.now()
	c.mu.Lock()
	if !l.pub.Held {
		l.pub.Expires = now.Add(c.opts.LeaseTTL)
	}
	c.leases[l.pub.ID] = l
	pub := l.pub.clone()
	c.mu.Unlock()
	c.wakeReaper()
	return pub
}

// liveLocked returns the lease named id unless it is unknown or expired at
// now. A lease past its expiry is gone even if the reaper has not freed it
// yet: what a call finds must not depend on when the reaper last ran. A
// held lease never expires. Called with c.mu held.
func (c *Copier) liveLocked(id string, now time.Time) (*lease, bool) {
	l, ok := c.leases[id]
	if !ok || !l.pub.Held && !now.Before(l.pub.Expires) {
		return nil, false
	}
	return l, true
}

// Leases returns the live leases, ordered by ID.
func (c *Copier) Leases() []Lease {
	if c.drv == nil {
		return nil
	}
	now := c.clock.now()
	c.mu.Lock()
	out := make([]Lease, 0, len(c.leases))
	for id := range c.leases {
		if l, ok := c.liveLocked(id, now); ok {
			out = append(out, l.pub.clone())
		}
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Lease) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Release frees a lease's device memory: for a HandoverFD lease, hubproxy's
// mapping and reference (a consumer that imported it keeps the memory),
// for a HandoverIPC lease the memory itself. Only the first Release of a live
// lease frees anything: an id that is unknown, already released or already
// expired gets ErrUnknownLease and changes nothing, so a retried Release is
// harmless and memory is never freed twice.
func (c *Copier) Release(id string) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	now := c.clock.now()
	c.mu.Lock()
	l, ok := c.liveLocked(id, now)
	if ok {
		delete(c.leases, id)
	}
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownLease, id)
	}
	return c.freeLease(l)
}

// Renew restarts a lease's TTL from now and returns the updated lease: the
// heartbeat of a consumer that keeps no socket open to hold its lease. A
// held lease has no TTL and is returned as it is.
func (c *Copier) Renew(id string) (Lease, error) {
	if err := c.enter(); err != nil {
		return Lease{}, err
	}
	defer c.leave()
	now := c.clock.now()
	c.mu.Lock()
	l, ok := c.liveLocked(id, now)
	if ok && !l.pub.Held {
		l.pub.Expires = now.Add(c.opts.LeaseTTL)
	}
	var pub Lease
	if ok {
		pub = l.pub.clone()
	}
	c.mu.Unlock()
	if !ok {
		return Lease{}, fmt.Errorf("%w: %q", ErrUnknownLease, id)
	}
	return pub, nil
}

// freeLease frees l's allocation once (see dispose). The caller has
// removed l from c.leases.
func (c *Copier) freeLease(l *lease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.freed {
		return nil
	}
	l.freed = true
	return c.dispose(l.alloc, true)
}

// ReadBack copies len(p) bytes at off inside the lease's allocation into p
// (cuMemcpyDtoH), for tests and verification. It checks ctx between
// BufferSize pieces; a lease released meanwhile yields ErrUnknownLease.
func (c *Copier) ReadBack(ctx context.Context, id string, off int64, p []byte) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	l, err := c.live(id)
	if err != nil {
		return err
	}
	if off < 0 || off > l.pub.Bytes || int64(len(p)) > l.pub.Bytes-off {
		return fmt.Errorf("%w: read of %d bytes at %d outside lease of %d", ErrBadRequest, len(p), off, l.pub.Bytes)
	}
	_, done, err := c.use(l.pub.Device)
	if err != nil {
		return err
	}
	defer done()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.freed {
		return fmt.Errorf("%w: %q", ErrUnknownLease, id)
	}
	for len(p) > 0 {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		n := min(int64(len(p)), c.opts.BufferSize)
		if err := c.drv.copyToHost(l.pub.Device, p[:n], l.alloc.dptr+uint64(off)); err != nil {
			return err
		}
		p, off = p[n:], off+n
	}
	return nil
}

// live returns the live lease named id, or ErrUnknownLease.
func (c *Copier) live(id string) (*lease, error) {
	now := c.clock.now()
	c.mu.Lock()
	l, ok := c.liveLocked(id, now)
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownLease, id)
	}
	return l, nil
}

// wakeReaper tells the reaper the earliest expiry may have changed.
func (c *Copier) wakeReaper() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// reap frees leases as they expire, until Close. It sleeps until the
// earliest expiry or until woken by addLease.
func (c *Copier) reap() {
	defer close(c.reaperDone)
	for {
		next, expired := c.takeExpired(c.clock.now())
		for _, l := range expired {
			if err := c.freeLease(l); err != nil {
				c.opts.Logger.Error("gpu: freeing expired lease", "lease", l.pub.ID, "err", err)
			}
		}
		fire, cancel := c.clock.alarm(next) // next is zero when no lease is left
		select {
		case <-c.life.Done():
			cancel()
			return
		case <-c.kick:
		case <-fire:
		}
		cancel()
	}
}

// takeExpired removes and returns the leases expired at now, and the
// earliest expiry among the rest (zero if none).
func (c *Copier) takeExpired(now time.Time) (time.Time, []*lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	var expired []*lease
	for id, l := range c.leases {
		switch exp := l.pub.Expires; {
		case l.pub.Held:
		case !now.Before(exp):
			expired = append(expired, l)
			delete(c.leases, id)
		case next.IsZero() || exp.Before(next):
			next = exp
		}
	}
	return next, expired
}
