// Package flight shares one piece of work among the callers that want the
// same key at once. Unlike golang.org/x/sync/singleflight it knows who still
// waits: the work runs on a context of its own (the caller that started it
// may leave while others wait), and that context is cancelled when the last
// caller has left, so work nobody wants any more stops instead of running on
// until its timeout. Callers that leave get their own context's error; the
// others still get the result.
package flight

import (
	"context"
	"sync"
	"time"
)

// Group runs at most one fn per key at a time. The zero value is ready.
type Group[V any] struct {
	mu      sync.Mutex
	flights map[string]*call[V]
}

type call[V any] struct {
	done    chan struct{}
	val     V // set before done is closed
	err     error
	waiters int // callers waiting; guarded by Group.mu
	cancel  context.CancelFunc
}

// Do returns the result of fn for key, starting fn unless work on key is
// already under way. fn runs on a context detached from ctx (keeping its
// values) that ends after timeout or when every caller has left. A caller
// whose ctx ends first gets ctx's error.
func (g *Group[V]) Do(ctx context.Context, key string, timeout time.Duration, fn func(context.Context) (V, error)) (V, error) {
	g.mu.Lock()
	if g.flights == nil {
		g.flights = map[string]*call[V]{}
	}
	c, ok := g.flights[key]
	if !ok {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		c = &call[V]{done: make(chan struct{}), cancel: cancel}
		g.flights[key] = c
		go func() {
			defer cancel()
			val, err := fn(fctx)
			g.mu.Lock()
			if g.flights[key] == c {
				delete(g.flights, key)
			}
			c.val, c.err = val, err
			g.mu.Unlock()
			close(c.done)
		}()
	}
	c.waiters++
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		g.mu.Lock()
		c.waiters--
		if c.waiters == 0 && g.flights[key] == c {
			// Nobody waits: later callers start afresh.
			delete(g.flights, key)
			c.cancel()
		}
		g.mu.Unlock()
		var zero V
		return zero, ctx.Err()
	}
}

// Waiting reports how many callers wait on key now: tests use it to start
// a flight's work only once every caller has joined.
func (g *Group[V]) Waiting(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.flights[key]; ok {
		return c.waiters
	}
	return 0
}
