package cache

import "time"

// testHooks stop the store at points a test needs to hold or observe. They
// are nil outside tests, and set before Open returns, so reading them needs
// no lock.
type testHooks struct {
	// janitorBatch runs on the janitor goroutine after it took a batch off
	// the queue and before it touches the disk.
	janitorBatch func()
	// wait runs in Handle.ensure each time a reader is about to wait for
	// fills, after it planned and adopted what it needs.
	wait func()
	// now, if set, is the store's clock: read-ahead pacing measures rates
	// by it, and the pin index ages by it.
	now func() time.Time
}

// now is the time by the test clock, else the system's.
func (s *Store) now() time.Time {
	if s.hooks.now != nil {
		return s.hooks.now()
	}
	return time.Now()
}
