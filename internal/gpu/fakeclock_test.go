package gpu

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when a test advances it. It also
// logs every alarm the reaper asks for, so a test can wait for the reaper
// to reach a known state (armed for a lease's expiry, or idle: a zero
// alarm) instead of sleeping.
type fakeClock struct {
	mu sync.Mutex
	// Guarded by mu.
	t      time.Time
	alarms []*fakeAlarm  // pending, unordered
	armed  []time.Time   // every alarm asked for, in order
	seen   int           // alarms already consumed by awaitAlarm
	grew   chan struct{} // closed and replaced when armed grows
}

type fakeAlarm struct {
	at time.Time
	c  chan time.Time // buffered: advance never blocks on a reaper
}

func newFakeClock() *fakeClock {
	// A fixed, non-zero start: Expires values are exact in tests.
	return &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), grew: make(chan struct{})}
}

func (f *fakeClock) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) alarm(at time.Time) (<-chan time.Time, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = append(f.armed, at)
	close(f.grew)
	f.grew = make(chan struct{})
	if at.IsZero() {
		return nil, func() {}
	}
	a := &fakeAlarm{at: at, c: make(chan time.Time, 1)}
	if !f.t.Before(at) {
		a.c <- f.t
		return a.c, func() {}
	}
	f.alarms = append(f.alarms, a)
	return a.c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.alarms = slices.DeleteFunc(f.alarms, func(x *fakeAlarm) bool { return x == a })
	}
}

// advance moves the clock by d and fires the alarms that are due.
func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
	f.alarms = slices.DeleteFunc(f.alarms, func(a *fakeAlarm) bool {
		if f.t.Before(a.at) {
			return false
		}
		a.c <- f.t
		return true
	})
}

// awaitAlarm waits until the reaper asks for an alarm at at (zero: for
// none, i.e. it has gone idle), skipping the alarms asked for before it.
// Each alarm is consumed once, so a wait never matches a stale request.
func (f *fakeClock) awaitAlarm(t *testing.T, at time.Time) {
	t.Helper()
	for {
		f.mu.Lock()
		for f.seen < len(f.armed) {
			got := f.armed[f.seen]
			f.seen++
			if got.Equal(at) {
				f.mu.Unlock()
				return
			}
		}
		grew := f.grew
		f.mu.Unlock()
		await(t, grew, "the reaper to arm an alarm at "+at.String())
	}
}
