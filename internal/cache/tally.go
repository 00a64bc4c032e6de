package cache

import (
	"context"
	"sync/atomic"
)

// Tally counts the upstream bytes one request cost: the blocks fills it
// started wrote, wherever they went afterwards (a fill may outlive its
// request; bytes written after the request ended are not its cost to
// report). A request that reads around the cache adds what it streams.
type Tally struct{ n atomic.Int64 }

// Add counts n more bytes.
func (t *Tally) Add(n int64) {
	if t != nil {
		t.n.Add(n)
	}
}

// Bytes is the count so far.
func (t *Tally) Bytes() int64 {
	if t == nil {
		return 0
	}
	return t.n.Load()
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
