package gpu

import "time"

// clock is where lease expiry reads the time and waits for it. The product
// uses the system clock; tests drive a manual one, so that TTL expiry is
// tested by moving time rather than by sleeping past it.
type clock interface {
	now() time.Time
	// alarm returns a channel that receives once the clock reaches at, and
	// a func that cancels it. A zero at never fires: the reaper asks for
	// that when no lease is left to expire, which is how a test sees it
	// go idle.
	alarm(at time.Time) (<-chan time.Time, func())
}

// systemClock is the real time.
type systemClock struct{}

func (systemClock) now() time.Time { return time.Now() }

func (systemClock) alarm(at time.Time) (<-chan time.Time, func()) {
	if at.IsZero() {
		return nil, func() {}
	}
	t := time.NewTimer(time.Until(at))
	return t.C, func() { t.Stop() }
}
