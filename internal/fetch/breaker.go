package fetch

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Defaults for the breaker's cool-down, doubled after every failed probe.
const (
	defaultCooldown    = 5 * time.Second
	defaultCooldownMax = time.Minute
)

// errMarkedDown is the cause of a call refused without being sent, because
// the upstream failed recently and its cool-down has not ended. It matches
// ErrUnavailable through netError, so callers fall back to the cache at
// cache speed rather than paying a timeout per request.
var errMarkedDown = errors.New("upstream marked down after recent failures")

// breaker remembers an upstream outage. After a call to the upstream origin
// fails for want of an answer (network errors, timeouts and 5xx that outlived
// the retries), it opens: calls fail at once for a cool-down, then one call
// at a time is let through as a probe. A probe that gets any answer closes
// it; one that fails opens it again for twice as long, up to a limit.
//
// Only "the upstream could not answer" counts. A 4xx, 429 included, is an
// answer: the upstream is up, it just said no (or "slow down", which the
// retries honour).
type breaker struct {
	// Immutable after newBreaker.
	cooldown, maxCooldown time.Duration
	now                   func() time.Time
	log                   *slog.Logger

	mu sync.Mutex
	// Guarded by mu.
	open    bool
	until   time.Time     // end of the cool-down while open
	wait    time.Duration // the current cool-down
	probing bool          // a probe call is in flight
	since   time.Time     // when the current state began
	reason  string        // why it opened
	last    time.Time     // when a call last had an outcome
}

func newBreaker(cooldown time.Duration, now func() time.Time, log *slog.Logger) *breaker {
	if cooldown <= 0 {
		cooldown = defaultCooldown
	}
	if now == nil {
		now = time.Now
	}
	return &breaker{cooldown: cooldown, maxCooldown: max(cooldown, defaultCooldownMax), now: now, log: log, since: now()}
}

// ticket is one call's permission to go upstream.
type ticket struct{ probe bool }

// allow reports whether a call may be sent now. While open it lets one probe
// through per cool-down; every other call is refused.
func (b *breaker) allow() (ticket, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return ticket{}, nil
	}
	if b.probing || b.now().Before(b.until) {
		return ticket{}, fmt.Errorf("%w (%s); next try in %s", errMarkedDown, b.reason,
			max(b.until.Sub(b.now()), 0).Round(time.Second))
	}
	b.probing = true
	return ticket{probe: true}, nil
}

// answered records that the upstream answered a call (any status below 500).
func (b *breaker) answered(t ticket) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = b.now()
	if t.probe {
		b.probing = false
	}
	if !b.open {
		return
	}
	down := b.now().Sub(b.since)
	b.open, b.wait, b.since, b.reason = false, 0, b.now(), ""
	b.log.Info("upstream is answering again", "down_for", down.Round(time.Millisecond).String())
}

// failed records that a call got no answer; reason says why, for the log.
func (b *breaker) failed(t ticket, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = b.now()
	if t.probe {
		b.probing = false
	}
	if b.open && !t.probe {
		return // a call sent before the breaker opened; already counted
	}
	if b.open {
		b.wait = min(2*b.wait, b.maxCooldown)
	} else {
		b.open, b.wait, b.since = true, b.cooldown, b.now()
		b.log.Warn("upstream unavailable; answering from the cache until it is back", "reason", reason,
			"retry_in", b.cooldown.String())
	}
	b.reason = reason
	b.until = b.now().Add(b.wait)
}

// abandoned releases a probe whose call ended without an outcome (the caller
// gave up), so the next call may probe.
func (b *breaker) abandoned(t ticket) {
	if !t.probe {
		return
	}
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// Health is what the client last learnt about the upstream.
type Health struct {
	Up      bool      // false while the breaker is open
	Since   time.Time // when the current state began
	Reason  string    // why the upstream is considered down
	Checked time.Time // when a call last told (zero: none yet)
}

func (b *breaker) health() Health {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Health{Up: !b.open, Since: b.since, Reason: b.reason, Checked: b.last}
}
