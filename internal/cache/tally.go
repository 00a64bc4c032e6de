package cache

import (
	"context"
	"io"
	"sync/atomic"
)

// Tally counts the bytes one request cost, apart by where they came from:
// upstream (the hub or its CDN) or the cluster's shared store. It counts
// the blocks fills it started wrote, wherever they went afterwards (a fill
// may outlive its request; bytes written after the request ended are not
// its cost to report). A request that reads around the cache adds what it
// streams.
type Tally struct{ up, store atomic.Int64 }

// Add counts n more bytes from upstream.
func (t *Tally) Add(n int64) {
	if t != nil {
		t.up.Add(n)
	}
}

// Bytes is the count of upstream bytes so far.
func (t *Tally) Bytes() int64 {
	if t == nil {
		return 0
	}
	return t.up.Load()
}

// StoreBytes is the count of bytes the shared store served so far.
func (t *Tally) StoreBytes() int64 {
	if t == nil {
		return 0
	}
	return t.store.Load()
}

// FromStore is an origin's body that can tell how many of the bytes read
// from it so far the cluster's shared store served; the rest came from
// upstream. A body that is not one came from upstream whole.
type FromStore interface {
	StoreBytes() int64
}

// BodyTally counts the bytes read from one origin body in a tally, each
// where it came from.
type BodyTally struct {
	t    *Tally
	src  FromStore // nil: all upstream
	seen int64     // src's store bytes already counted
}

// For returns a BodyTally for the bytes read from body. Nil-safe, as t is.
func (t *Tally) For(body io.Reader) BodyTally {
	src, _ := body.(FromStore)
	return BodyTally{t: t, src: src}
}

// Add counts n bytes just read from the body: those the body says the
// store served since the last Add as store bytes, the rest as upstream's.
func (c *BodyTally) Add(n int64) {
	if c.t == nil {
		return
	}
	var store int64
	if c.src != nil {
		now := c.src.StoreBytes()
		store, c.seen = min(max(now-c.seen, 0), n), now
	}
	c.t.store.Add(store)
	c.t.up.Add(n - store)
}

type tallyKey struct{}

// WithTally returns ctx carrying t: handles opened with it count their
// fills' bytes there.
func WithTally(ctx context.Context, t *Tally) context.Context {
	return context.WithValue(ctx, tallyKey{}, t)
}

// TallyFrom returns the tally ctx carries, or nil.
func TallyFrom(ctx context.Context) *Tally {
	t, _ := ctx.Value(tallyKey{}).(*Tally)
	return t
}
