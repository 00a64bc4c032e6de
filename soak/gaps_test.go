package soak

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
	"time"
)

// A body's pace: the wait for the first byte counts from the request, the
// gaps from one byte to the next, and a body cut short stalls until it
// ended.
func TestGapMeter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	g := newGapMeter(t0)
	g.note(0, at(time.Second)) // an empty read is no byte
	g.note(10, at(3*time.Second))
	g.note(10, at(4*time.Second))
	g.note(10, at(9*time.Second))
	g.note(10, at(9500*time.Millisecond))
	if g.firstByte != 3*time.Second || g.maxGap != 5*time.Second {
		t.Fatalf("first byte %s, longest gap %s; want 3s and 5s", g.firstByte, g.maxGap)
	}
	if got := g.stall(at(20*time.Second), true); got != 5*time.Second {
		t.Errorf("a complete body stalled %s, want its longest gap, 5s", got)
	}
	if got := g.stall(at(20*time.Second), false); got != 10500*time.Millisecond {
		t.Errorf("a body cut short stalled %s, want the wait from its last byte to its end, 10.5s", got)
	}
	none := newGapMeter(t0)
	if got := none.stall(at(7*time.Second), true); got != 7*time.Second {
		t.Errorf("a body with no byte stalled %s, want the whole wait, 7s", got)
	}
}

// gapReader passes every byte through and times each read.
func TestGapReader(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 100)
	t0 := time.Unix(1000, 0)
	clock := t0
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	g := newGapMeter(t0)
	got, err := io.ReadAll(&gapReader{r: iotest.OneByteReader(bytes.NewReader(data)), g: g, now: now})
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if g.firstByte != time.Second || g.maxGap != time.Second {
		t.Errorf("first byte %s, longest gap %s; want 1s each", g.firstByte, g.maxGap)
	}
}

func TestWorstPace(t *testing.T) {
	w := worstPace([]readPace{
		{proxy: "p0", firstByte: 3 * time.Second, maxGap: time.Second, stall: 3 * time.Second},
		{proxy: "p1", firstByte: time.Second, maxGap: 4 * time.Second, stall: 4 * time.Second},
	})
	if w.proxy != "p1" || w.stall != 4*time.Second || w.firstByte != 3*time.Second || w.maxGap != 4*time.Second {
		t.Errorf("%+v", w)
	}
}
