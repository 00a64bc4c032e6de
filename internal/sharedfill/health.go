package sharedfill

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// Health is the store's state as this node's calls to it found it.
type Health struct {
	Up     bool
	Since  time.Time // when it went down; zero while up
	Reason string    // the last failure, while down
}

// health is a breaker: a failure opens it for a pause that doubles with each
// failure in a row (up to maxPause); while open, origins go straight
// upstream. Once the pause is over calls go to the store again, and the
// first success closes it.
type health struct {
	mu      sync.Mutex
	down    bool
	since   time.Time
	reason  string
	pause   time.Duration
	retryAt time.Time
}

const (
	minPause = time.Second
	maxPause = 30 * time.Second
)

// Health reports the store's state.
func (s *Sharer) Health() Health {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down {
		return Health{Up: true}
	}
	return Health{Since: h.since, Reason: h.reason}
}

// usable reports whether calls may go to the store now: it is up, or its
// pause is over.
func (s *Sharer) usable() bool {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down || !time.Now().Before(h.retryAt)
}

// tryStore is usable for a read about to go to the store. While the store
// is down, only one read per pause probes it: the first after the pause,
// which pushes the next chance back by as long as the probe may take, so a
// store that hangs holds one read at a time for OpTimeout, not every read
// that arrives after the pause. The probe's answer (observe) closes the
// breaker or opens it for a longer pause.
func (s *Sharer) tryStore() bool {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down {
		return true
	}
	now := time.Now()
	if now.Before(h.retryAt) {
		return false
	}
	h.retryAt = now.Add(max(h.pause, s.opts.OpTimeout))
	return true
}

// observe records how a store call ended. Answers (found, not found,
// exists) close the breaker; failures open it, unless the call was only
// cancelled by its caller, which says nothing about the store.
func (s *Sharer) observe(ctx context.Context, err error) {
	if err != nil && (errors.Is(ctx.Err(), context.Canceled) || s.ctx.Err() != nil) {
		return // the caller gave up; a deadline, though, is the store being slow
	}
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil || errors.Is(err, sharedstore.ErrNotFound) || errors.Is(err, sharedstore.ErrExists) {
		if h.down {
			s.log.Info("shared store answers again; sharing chunks through it", "down_for", time.Since(h.since).Round(time.Second))
		}
		h.down, h.pause, h.reason = false, 0, ""
		return
	}
	h.reason = err.Error()
	h.pause = min(max(2*h.pause, minPause), maxPause)
	h.retryAt = time.Now().Add(h.pause)
	if !h.down {
		h.down, h.since = true, time.Now()
		s.log.Warn("shared store failing; serving from upstream until it answers", "err", err)
	}
}
