// Package breaker is the state machine of an outage breaker: closed while a
// dependency answers, open (calls go around it, or fail at once) for a
// cool-down once it fails, the cool-down doubling with each failure in a row
// up to a ceiling, and closed again by the first success. It is the one
// such machine hubproxy has: fetch uses it for the upstream hub, sharedfill
// for the shared store.
//
// What counts as a failure, and who probes once the cool-down is over, is
// the user's policy and stays with the user: fetch hears only calls it
// chose, waits for suspicion and asks a probe of its own in the background;
// sharedfill opens on any store error and lets one call through as the
// probe. Both feed their verdicts in here.
//
// A Breaker reads time only from the clock it is given, so its tests (and
// its users' tests) advance a fake clock instead of sleeping.
package breaker

import "time"

// Breaker holds an outage breaker's state. It is not safe for concurrent
// use: its user guards it with the lock that guards the user's own state
// (a probe in flight, routes under suspicion), so that one decision reads
// both at once.
type Breaker struct {
	// Immutable after New.
	first, ceiling time.Duration
	now            func() time.Time

	open   bool
	since  time.Time     // when the current state began
	reason string        // the last failure's, while open
	wait   time.Duration // the current cool-down, while open
	until  time.Time     // the end of the cool-down (or of a probe's hold), while open
}

// State is a snapshot of a Breaker, for health reports.
type State struct {
	Open   bool
	Since  time.Time // when the current state began (New, for one never opened)
	Reason string    // why it is open; "" while closed
	Until  time.Time // while open, when calls may try again
}

// New returns a closed Breaker whose first cool-down is first, doubling up
// to ceiling (at least first). now is its clock; nil means time.Now.
func New(first, ceiling time.Duration, now func() time.Time) *Breaker {
	if now == nil {
		now = time.Now
	}
	return &Breaker{first: first, ceiling: max(first, ceiling), now: now, since: now()}
}

// Now reads the Breaker's clock, for a user's own timing decisions made
// alongside the Breaker's.
func (b *Breaker) Now() time.Time { return b.now() }

// Open reports whether the breaker is open.
func (b *Breaker) Open() bool { return b.open }

// Ready reports whether calls may go now: the breaker is closed, or its
// cool-down is over (the next call may probe).
func (b *Breaker) Ready() bool { return !b.open || !b.now().Before(b.until) }

// Left is how long the cool-down still runs; 0 when Ready.
func (b *Breaker) Left() time.Duration {
	if !b.open {
		return 0
	}
	return max(b.until.Sub(b.now()), 0)
}

// Probe reports whether a call may go now, and makes the one call that
// goes while the breaker is open its probe: it is closed (every call may
// go), or its cool-down is over, and then the next chance is pushed back by
// the cool-down or hold, whichever is longer, so that only this call probes
// even if its verdict takes hold to come.
func (b *Breaker) Probe(hold time.Duration) bool {
	if !b.open {
		return true
	}
	now := b.now()
	if now.Before(b.until) {
		return false
	}
	b.until = now.Add(max(b.wait, hold))
	return true
}

// Fail records a failure, for reason: a closed breaker opens for the first
// cool-down, an open one doubles its cool-down (up to the ceiling) from
// now. It reports whether the breaker was closed before.
func (b *Breaker) Fail(reason string) (opened bool) {
	now := b.now()
	if b.open {
		b.wait = min(2*b.wait, b.ceiling)
	} else {
		b.open, b.wait, b.since = true, b.first, now
		opened = true
	}
	b.reason = reason
	b.until = now.Add(b.wait)
	return opened
}

// Succeed records a success: an open breaker closes and forgets its
// cool-down. It reports how long the breaker was open, and whether it was.
func (b *Breaker) Succeed() (downFor time.Duration, closed bool) {
	if !b.open {
		return 0, false
	}
	now := b.now()
	downFor = now.Sub(b.since)
	b.open, b.wait, b.since, b.reason, b.until = false, 0, now, "", time.Time{}
	return downFor, true
}

// State returns a snapshot of b.
func (b *Breaker) State() State {
	s := State{Open: b.open, Since: b.since, Reason: b.reason}
	if b.open {
		s.Until = b.until
	}
	return s
}
