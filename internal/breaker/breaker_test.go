package breaker

import (
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/testutil"
)

func newTest() (*Breaker, *testutil.Clock) {
	clk := testutil.NewClock(time.Unix(1000, 0))
	return New(time.Second, 4*time.Second, clk.Now), clk
}

// A failure opens the breaker for the first cool-down; each failure in a
// row doubles it up to the ceiling; a success closes it and forgets the
// cool-down, so the next outage starts from the first again.
func TestCoolDownDoublesToTheCeilingAndResets(t *testing.T) {
	b, clk := newTest()
	if !b.Ready() || b.Open() || b.Left() != 0 {
		t.Fatalf("a new breaker: %+v", b.State())
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		opened := b.Fail("boom")
		if opened != (i == 0) {
			t.Errorf("failure %d: opened = %v", i, opened)
		}
		if b.Ready() || b.Left() != want {
			t.Fatalf("failure %d: ready %v, left %v; want %v of cool-down", i, b.Ready(), b.Left(), want)
		}
		clk.Advance(want - time.Millisecond)
		if b.Ready() {
			t.Fatalf("failure %d: ready before its cool-down ended", i)
		}
		clk.Advance(time.Millisecond)
		if !b.Ready() || b.Left() != 0 {
			t.Fatalf("failure %d: not ready once its cool-down ended (left %v)", i, b.Left())
		}
	}
	clk.Advance(3 * time.Second)
	downFor, closed := b.Succeed()
	if !closed || downFor != 14*time.Second || b.Open() {
		t.Fatalf("Succeed = %v, %v; want closed after 14s down", downFor, closed)
	}
	if _, closed := b.Succeed(); closed {
		t.Error("a second success closed it again")
	}
	if !b.Fail("again") || b.Left() != time.Second {
		t.Errorf("the next outage: left %v, want the first cool-down again", b.Left())
	}
}

// State says when the current state began and why the breaker is open.
func TestStateSinceAndReason(t *testing.T) {
	b, clk := newTest()
	start := clk.Now()
	if st := b.State(); st.Open || !st.Since.Equal(start) || st.Reason != "" || !st.Until.IsZero() {
		t.Fatalf("new: %+v", st)
	}
	clk.Advance(time.Minute)
	b.Fail("first")
	clk.Advance(time.Second)
	b.Fail("second")
	st := b.State()
	if !st.Open || !st.Since.Equal(start.Add(time.Minute)) || st.Reason != "second" ||
		!st.Until.Equal(start.Add(time.Minute+3*time.Second)) {
		t.Fatalf("open: %+v", st)
	}
	clk.Advance(time.Second)
	b.Succeed()
	if st := b.State(); st.Open || !st.Since.Equal(start.Add(time.Minute+2*time.Second)) || st.Reason != "" || !st.Until.IsZero() {
		t.Fatalf("closed again: %+v", st)
	}
}

// Once the cool-down is over exactly one call probes: Probe lets it go and
// holds the others back for the cool-down or the hold, whichever is longer,
// until the probe's verdict comes.
func TestProbeLetsOneCallThrough(t *testing.T) {
	b, clk := newTest()
	for range 3 {
		if !b.Probe(time.Hour) {
			t.Fatal("a closed breaker held a call back")
		}
	}
	b.Fail("down")
	if b.Probe(0) {
		t.Fatal("a call went during the cool-down")
	}
	clk.Advance(time.Second)
	if !b.Probe(10 * time.Second) {
		t.Fatal("no call may probe after the cool-down")
	}
	if b.Probe(0) || b.Ready() {
		t.Fatal("a second call probed while the first's verdict was pending")
	}
	clk.Advance(10*time.Second - time.Millisecond)
	if b.Probe(0) {
		t.Fatal("the hold ended early")
	}
	clk.Advance(time.Millisecond)
	if !b.Probe(0) {
		t.Fatal("no call may probe once a hung probe's hold is over")
	}
	// A hold shorter than the cool-down holds for the cool-down.
	if b.Probe(0) {
		t.Fatal("a zero hold let every call probe")
	}
	clk.Advance(time.Second)
	if !b.Probe(0) {
		t.Fatal("no probe after the cool-down")
	}
	b.Fail("still down") // the probe's verdict: a longer pause
	clk.Advance(time.Second)
	if b.Probe(0) {
		t.Fatal("a failed probe did not lengthen the pause")
	}
}

// A nil clock is the system's.
func TestNilClockIsTheSystems(t *testing.T) {
	before := time.Now()
	b := New(time.Hour, 0, nil)
	if now := b.Now(); now.Before(before) || time.Since(now) > time.Minute {
		t.Fatalf("Now = %v", now)
	}
	b.Fail("x")
	if l := b.Left(); l <= 59*time.Minute || l > time.Hour {
		t.Fatalf("left %v of a one-hour cool-down (ceiling below first)", l)
	}
}
