package cache

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// paceSetup is a handle of a partial file whose reader is paced by a fake
// clock, and drives its epochs by hand.
type paceSetup struct {
	t     *testing.T
	s     *Store
	clock *testutil.Clock
	chunk int64
}

func newPaceSetup(t *testing.T, readAhead, maxFills int) *paceSetup {
	clock := testutil.NewClock(time.Unix(1e9, 0))
	s := newStoreHooks(t, Options{BlockSize: 4096, ChunkSize: 16384, ReadAhead: readAhead, MaxFills: maxFills},
		testHooks{now: clock.Now})
	return &paceSetup{t: t, s: s, clock: clock, chunk: 16384}
}

// reader opens a new file and starts pacing its handle.
func (p *paceSetup) reader(name string) *Handle {
	data := genData(1<<20, 3)
	h, err := p.s.Open(context.Background(), fileFor(name, data), &fakeOrigin{data: data})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { h.Close() })
	h.Expect(0, int64(len(data)))
	p.depth(h)
	return h
}

// depth is the handle's effective read-ahead depth.
func (p *paceSetup) depth(h *Handle) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.depthLocked()
}

// epoch has the reader read one window's worth at rate bytes/s, waiting
// for bytes or not, and returns the depth the controller then chose.
func (p *paceSetup) epoch(h *Handle, rate float64, starved bool) int {
	n := int64(p.depth(h)) * p.chunk
	p.clock.Advance(time.Duration(float64(n) / rate * float64(time.Second)))
	h.paced(n, starved)
	return p.depth(h)
}

// A reader starved on a link that delivers more the more requests are in
// flight (a CDN capping each connection) doubles its depth each epoch, up
// to upstream-parallelism and no further.
func TestReadAheadGrowsWhileItPays(t *testing.T) {
	p := newPaceSetup(t, 2, 16)
	h := p.reader("a.bin")
	var got []int
	for range 6 {
		d := p.depth(h)
		got = append(got, p.epoch(h, float64(d)*50e6, true)) // 50 MB/s per request
	}
	want := []int{4, 8, 16, 16, 16, 16}
	if !slices.Equal(got, want) {
		t.Errorf("depths %v, want %v", got, want)
	}
}

// On a link that delivers the same whatever the depth (a saturated line),
// the first step that buys nothing is taken back, slow start ends, and from
// then on the reader only probes one chunk deeper now and then: it never
// holds more than one chunk past the depth that pays.
func TestReadAheadStopsGrowingWhenItDoesNotPay(t *testing.T) {
	p := newPaceSetup(t, 2, 16)
	h := p.reader("a.bin")
	var got []int
	for range 8 {
		got = append(got, p.epoch(h, 100e6, true))
	}
	// 2 → 4 (the first measurement), 4 bought nothing → 2, probe 3, no → 2, …
	want := []int{4, 2, 3, 2, 3, 2, 3, 2}
	if !slices.Equal(got, want) {
		t.Errorf("depths %v, want %v", got, want)
	}
	// A link that frees up (here: delivering per request again) is noticed
	// by the next probe.
	for range 3 {
		d := p.depth(h)
		p.epoch(h, float64(d)*50e6, true)
	}
	if d := p.depth(h); d < 5 {
		t.Errorf("depth %d after the link freed up, want it growing again", d)
	}
}

// A reader that never waits for bytes sets the pace itself: its depth stays.
func TestReadAheadHoldsForASlowReader(t *testing.T) {
	p := newPaceSetup(t, 4, 16)
	h := p.reader("a.bin")
	for range 5 {
		if d := p.epoch(h, 1e6, false); d != 4 {
			t.Fatalf("depth %d for a reader that never waited, want 4", d)
		}
	}
}

// A failed fill of the file (an error, a 429 or 5xx past fetch's retries, a
// stall) halves the depth at once, and growth resumes one step at a time.
func TestReadAheadHalvesOnFailure(t *testing.T) {
	p := newPaceSetup(t, 2, 16)
	h := p.reader("a.bin")
	for range 3 {
		p.epoch(h, float64(p.depth(h))*50e6, true)
	}
	if d := p.depth(h); d != 16 {
		t.Fatalf("depth %d before the failure, want 16", d)
	}
	h.it.mu.Lock()
	h.it.failLocked(ranges.Range{Pos: 0, End: 4096}, errors.New("upstream 429"))
	h.it.mu.Unlock()
	h.paced(1, true)
	if d := p.depth(h); d != 8 {
		t.Fatalf("depth %d after one failure, want 8", d)
	}
	if d := p.epoch(h, 8*50e6, true); d != 9 {
		t.Errorf("depth %d after a good epoch following the failure, want 9 (no slow start)", d)
	}
}

// Readers of partial files share upstream-parallelism: each may grow to its
// share, never below read-ahead, and a reader that leaves (or whose file
// completes) gives its share back.
func TestReadAheadSharesUpstreamParallelism(t *testing.T) {
	p := newPaceSetup(t, 2, 16)
	a, b := p.reader("a.bin"), p.reader("b.bin")
	for range 5 {
		p.together(a, b)
	}
	if da, db := p.depth(a), p.depth(b); da != 8 || db != 8 {
		t.Errorf("depths %d and %d with two readers sharing 16, want 8 each", da, db)
	}
	c := p.reader("c.bin")
	if da, dc := p.depth(a), p.depth(c); da != 5 || dc != 2 {
		t.Errorf("a third reader: depths %d and %d, want 5 (16/3) and 2 (read-ahead)", da, dc)
	}
	b.Close()
	c.Close()
	for range 2 {
		p.together(a)
	}
	if d := p.depth(a); d != 16 {
		t.Errorf("depth %d alone again, want 16", d)
	}
	if n := p.s.readers.Load(); n != 1 {
		t.Errorf("%d paced readers counted, want 1", n)
	}
}

// together has readers read concurrently for one round trip of a link
// that delivers one chunk per request per round trip: each reads its
// window's worth, waiting for it.
func (p *paceSetup) together(hs ...*Handle) {
	depths := make([]int, len(hs))
	for i, h := range hs {
		depths[i] = p.depth(h)
	}
	p.clock.Advance(time.Millisecond)
	for i, h := range hs {
		h.paced(int64(depths[i])*p.chunk, true)
	}
}

// End to end, against an origin whose every request takes a while however
// many run at once (a CDN capping each connection): a cold sequential
// reader ends up with several times Options.ReadAhead requests in flight,
// and never more than MaxFills. Read-ahead still never passes the window.
func TestColdReaderUsesTheLinkItHas(t *testing.T) {
	const readAhead, maxFills = 2, 12
	s := newStore(t, Options{BlockSize: 4096, ChunkSize: 16384, ReadAhead: readAhead, MaxFills: maxFills})
	data := genData(4<<20, 9)
	var inFlight, peak atomic.Int64
	o := &fakeOrigin{data: data, hook: func(ctx context.Context, off, n int64) error {
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			if p := peak.Load(); now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		select {
		case <-time.After(20 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	f := fileFor("big.bin", data)
	h, err := s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.Expect(0, 3<<20)
	if err := readSeq(h, 0, 3<<20, 32<<10, data); err != nil {
		t.Fatal(err)
	}
	settle(s)
	t.Logf("peak %d requests in flight (read-ahead %d, upstream-parallelism %d); %d requests, %d bytes",
		peak.Load(), readAhead, maxFills, o.requests.Load(), o.bytes.Load())
	if got := peak.Load(); got < 3*readAhead || got > maxFills {
		t.Errorf("peak %d requests in flight, want between %d and %d", got, 3*readAhead, maxFills)
	}
	if got := o.bytes.Load(); got > 3<<20 {
		t.Errorf("%d bytes fetched for a 3 MiB window", got)
	}
}
