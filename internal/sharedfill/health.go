package sharedfill

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/breaker"
	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// Health is the store's state as this node's calls to it found it.
type Health struct {
	Up     bool
	Since  time.Time // when it went down; zero while up
	Reason string    // the last failure, while down
}

// health is the store's breaker (internal/breaker's state machine): any
// failure opens it for a pause that doubles with each failure in a row
// (minPause up to maxPause); while open, origins go straight upstream. Once
// the pause is over one call goes to the store again as the probe, and the
// first success closes it.
type health struct {
	mu sync.Mutex
	b  *breaker.Breaker // guarded by mu
}

const (
	minPause = time.Second
	maxPause = 30 * time.Second
)

// newHealth returns a closed breaker reading the clock now.
func newHealth(now func() time.Time) *health {
	return &health{b: breaker.New(minPause, maxPause, now)}
}

// Health reports the store's state.
func (s *Sharer) Health() Health {
	h := s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.b.State()
	if !st.Open {
		return Health{Up: true}
	}
	return Health{Since: st.Since, Reason: st.Reason}
}

// usable reports whether calls may go to the store now: it is up, or its
// pause is over.
func (s *Sharer) usable() bool {
	h := s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.b.Ready()
}

// tryStore is usable for a read about to go to the store. While the store
// is down, only one read per pause probes it: the first after the pause,
// which pushes the next chance back by as long as the probe may take, so a
// store that hangs holds one read at a time for OpTimeout, not every read
// that arrives after the pause. The probe's answer (observe) closes the
// breaker or opens it for a longer pause.
func (s *Sharer) tryStore() bool {
	h := s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.b.Probe(s.opts.OpTimeout)
}

// observe records how a store call ended. Answers (found, not found,
// exists) close the breaker; failures open it, unless the call was only
// cancelled by its caller, which says nothing about the store.
func (s *Sharer) observe(ctx context.Context, err error) {
	if err != nil && (errors.Is(ctx.Err(), context.Canceled) || s.ctx.Err() != nil) {
		return // the caller gave up; a deadline, though, is the store being slow
	}
	h := s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil || errors.Is(err, sharedstore.ErrNotFound) || errors.Is(err, sharedstore.ErrExists) {
		if downFor, closed := h.b.Succeed(); closed {
			s.log.Info("shared store answers again; sharing chunks through it", "down_for", downFor.Round(time.Second))
		}
		return
	}
	if h.b.Fail(err.Error()) {
		s.log.Warn("shared store failing; serving from upstream until it answers", "err", err)
	}
}
