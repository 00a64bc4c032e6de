package fetch

import (
	"context"
	"io"
	"sync"
	"time"
)

// guard bounds how long one request attempt may wait on the upstream without
// progress. It is armed only while fetch itself is blocked on the network
// (waiting for response headers, or inside a body Read), so a consumer that is
// slow to read never counts as a stalled upstream. When it fires it cancels
// the attempt's context with ErrStalled as the cause, which unblocks the
// pending read; transportErr then reports the stall.
type guard struct {
	c      context.Context         // immutable: the attempt's context
	d      time.Duration           // immutable; 0 means no guard
	cancel context.CancelCauseFunc // immutable; nil when d == 0

	mu      sync.Mutex // guards the fields below
	t       *time.Timer
	armed   bool      // fetch is blocked on the network
	armedAt time.Time // when it blocked
	fired   bool      // the attempt was cancelled for a stall
}

// newGuard derives the attempt's context from parent. With d <= 0 it returns
// parent itself and a guard whose methods do nothing.
func newGuard(parent context.Context, d time.Duration) (context.Context, *guard) {
	if d <= 0 {
		return parent, &guard{c: parent}
	}
	ctx, cancel := context.WithCancelCause(parent)
	return ctx, &guard{c: ctx, d: d, cancel: cancel}
}

// ctx is the attempt's context, for classifying a failed read.
func (g *guard) ctx() context.Context { return g.c }

// arm starts the clock: fetch is about to block on the upstream.
func (g *guard) arm() {
	if g.cancel == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
	g.armedAt = time.Now()
	if g.t == nil {
		g.t = time.AfterFunc(g.d, g.fire)
	} else {
		g.t.Reset(g.d)
	}
}

// disarm stops the clock: the upstream made progress (or failed).
func (g *guard) disarm() {
	if g.cancel == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = false
	if g.t != nil {
		g.t.Stop()
	}
}

// fire runs on the timer's goroutine. A fire that races with disarm or a
// later arm finds the guard disarmed or not yet due, and does nothing or
// waits out the rest.
func (g *guard) fire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed || g.fired {
		return
	}
	if rest := g.d - time.Since(g.armedAt); rest > 0 {
		g.t.Reset(rest)
		return
	}
	g.fired = true
	g.cancel(ErrStalled)
}

// stalled reports whether the guard cancelled the attempt.
func (g *guard) stalled() bool {
	if g.cancel == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fired
}

// discard drains body under the guard, so that a trickling error or
// redirect body cannot hold the attempt, and closes it.
func (g *guard) discard(body io.ReadCloser) {
	g.arm()
	discard(body)
	g.disarm()
}

// stop ends the attempt: the timer is stopped and its context cancelled.
// Call it once the response body is closed or abandoned.
func (g *guard) stop() {
	if g.cancel == nil {
		return
	}
	g.mu.Lock()
	g.armed = false
	if g.t != nil {
		g.t.Stop()
	}
	g.mu.Unlock()
	g.cancel(nil)
}
