// Package testutil is what hubproxy's tests share for waiting: Eventually,
// the one polling helper, Clock, a clock a test moves by hand, for code
// that takes an injected clock (func() time.Time) so that its tests never
// sleep out a TTL or a cool-down, and SyncBuffer, for output written while
// the test reads it. Only tests import it.
package testutil

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing the test with what once
// within has passed. The polls start at a millisecond apart and back off
// to 20 ms, so a condition that holds soon costs little and one that takes
// seconds does not spin. A generous within only slows a test that fails.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// Clock is a time source a test moves by hand; its Now is what the code
// under test is given as its clock. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock that reads start until it is moved.
func NewClock(start time.Time) *Clock { return &Clock{t: start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// SyncBuffer is a bytes.Buffer that goroutines may write (a logger, a
// child's output pipes) while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
