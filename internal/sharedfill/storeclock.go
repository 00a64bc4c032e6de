package sharedfill

import (
	"context"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// storeClock measures the store's clock against this node's, so that a
// claim's age is judged by the clock that stamped it (its ModTime) and
// nodes' clocks never enter it: a node whose clock ran 2m15s behind had
// every live claim of it taken over as long dead.
type storeClock struct {
	offset   time.Duration // the store's clock less ours
	measured time.Time     // by our clock; zero: never
}

// clockKey is the object written to read the store's clock off its
// ModTime; every node overwrites the same one.
const clockKey = layoutPrefix + "clock"

// clockEvery is how long a measured offset is used before it is measured
// again.
const clockEvery = time.Minute

// storeNow is the store's clock now, measured at most every clockEvery by
// writing clockKey and reading its ModTime back: the ModTime lies between
// the write's start and the stat's end, so the error is at most that round
// trip (and the store's timestamp resolution, a second on S3), far below
// the leases judged by it.
func (s *Sharer) storeNow(ctx context.Context) (time.Time, error) {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	c := &s.clock
	if !c.measured.IsZero() && time.Since(c.measured) < clockEvery {
		return time.Now().Add(c.offset), nil
	}
	before := time.Now()
	if err := s.call(ctx, func(ctx context.Context) error { return s.objs.Put(ctx, clockKey, []byte(s.opts.Owner)) }); err != nil {
		return time.Time{}, err
	}
	var o sharedstore.Object
	if err := s.call(ctx, func(ctx context.Context) (err error) {
		o, err = s.objs.Stat(ctx, clockKey)
		return err
	}); err != nil {
		return time.Time{}, err
	}
	after := time.Now()
	c.offset, c.measured = o.ModTime.Sub(before.Add(after.Sub(before)/2)), after
	return after.Add(c.offset), nil
}
