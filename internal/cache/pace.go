package cache

import "time"

// A sequential reader's read-ahead depth (chunks in flight ahead of it)
// adapts to what upstream delivers, the way TCP's congestion window does:
//
//   - It starts at Options.ReadAhead. A link that delivers per connection
//     (a CDN that caps each connection, a long round trip) needs more
//     connections to fill; a slow reader or a saturated link does not.
//   - Each epoch (the reader consuming one window's worth of bytes) ends in
//     a decision. If the reader had to wait for bytes during it, the
//     pipeline was too shallow: the depth grows, doubling at first (slow
//     start), for as long as each step raised the delivered rate by at least
//     half what it promised (see paceGain). A step that did not pay is taken
//     back and slow start ends; the next epoch probes one chunk deeper, and
//     a probe that pays resumes doubling, so a depth bounded by a busy link
//     rises soon after the link frees up. A reader that never waited keeps
//     its depth.
//   - A fill of the file failing (an error, a 429 or 5xx that outlasted
//     fetch's retries, a stall) halves the depth, as a loss does TCP's.
//   - It grows no further than the reader's fair share of Options.MaxFills
//     (upstream-parallelism): MaxFills divided among the sequential readers
//     of partial files, but never below Options.ReadAhead. One cold reader
//     on a fast link may use every connection; two share them evenly.
//     (Chunks beyond the free slots only queue, and the slots are handed
//     out first come, first served, so readers at equal depths get equal
//     shares.)
//
// Time is measured here only to compare an epoch's rate with the last one's;
// nothing waits on it.

// paceGain is the share of a step's proportional promise (doubling the
// depth promises twice the rate, one more chunk at depth d promises
// (d+1)/d) that the delivered rate must rise by for the step to count as
// paying. Half tolerates noise at small depths and still lets deep
// pipelines grow one chunk at a time.
const paceGain = 0.5

// promise is the rate, relative to lastRate, that the step from lastDepth
// to depth must deliver to pay.
func (p *pace) promise() float64 {
	return 1 + paceGain*float64(p.depth-p.lastDepth)/float64(max(p.lastDepth, 1))
}

// pace is a Handle's read-ahead controller, guarded by Handle.mu.
// Handle.paceCounted (set under Handle.mu) says whether it is counted in
// Store.readers, and can be checked without the lock.
type pace struct {
	depth int  // chunks of read-ahead; 0 until the handle reads in a window
	slow  bool // slow start: doubling until a step does not pay

	epochStart time.Time
	epochBytes int64
	starved    bool    // the reader waited for bytes during the epoch
	probed     bool    // the depth was just raised, to see whether it pays
	lastRate   float64 // bytes/s of the epoch before that step
	lastDepth  int     // the depth before that step, to take it back
	fails      uint64  // the item's fill failures seen so far
}

// depthLocked returns the handle's read-ahead depth, within its fair share.
// The caller holds h.mu.
func (h *Handle) depthLocked() int {
	p := &h.pace
	if !h.paceCounted.Load() {
		h.paceCounted.Store(true)
		h.s.readers.Add(1)
		p.depth, p.slow = h.s.opts.ReadAhead, true
		p.fails = h.it.failures.Load()
		p.newEpoch(h.s.now()) // the first epoch includes the first wait
	}
	return min(p.depth, h.fairShare())
}

// fairShare is the most chunks one sequential reader may keep in flight.
func (h *Handle) fairShare() int {
	return max(h.s.opts.ReadAhead, h.s.opts.MaxFills/int(max(1, h.s.readers.Load())))
}

// paced accounts a read of n bytes inside the Expect window that waited for
// bytes or not, and ends the epoch once a window's worth has been read.
func (h *Handle) paced(n int64, waited bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := &h.pace
	if !h.paceCounted.Load() {
		return
	}
	now := h.s.now()
	p.epochBytes += n
	p.starved = p.starved || waited
	if f := h.it.failures.Load(); f != p.fails {
		p.fails = f
		p.depth = max(1, p.depth/2)
		p.slow, p.probed = false, false
		p.newEpoch(now)
		return
	}
	if p.epochBytes < int64(min(p.depth, h.fairShare()))*h.s.opts.ChunkSize {
		return
	}
	elapsed := now.Sub(p.epochStart).Seconds()
	rate := float64(p.epochBytes) / max(elapsed, 1e-6)
	switch {
	case !p.starved:
		// The reader, not the link, set the pace.
	case !p.probed || p.lastRate == 0 || rate >= p.lastRate*p.promise():
		// Nothing is being tried, or the last step paid: go deeper, and
		// see whether that pays in turn. A probe that paid means the
		// link has room again: back to doubling, to find out how much.
		if p.probed && p.lastRate > 0 && p.depth > p.lastDepth {
			p.slow = true
		}
		p.lastRate, p.lastDepth, p.probed = rate, p.depth, true
		if p.slow {
			p.depth *= 2
		} else {
			p.depth++
		}
		p.depth = min(p.depth, h.fairShare())
	default:
		// The last step bought nothing: the link, not the pipeline, is
		// the limit. Take it back; the next epoch probes one step again,
		// so a link that frees up is noticed.
		p.depth, p.slow, p.probed = p.lastDepth, false, false
	}
	p.newEpoch(now)
}

func (p *pace) newEpoch(now time.Time) {
	p.epochStart, p.epochBytes, p.starved = now, 0, false
}

// unpace removes the handle from the store's count of sequential readers
// of partial files: it is closed, or its file is complete.
func (h *Handle) unpace() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.paceCounted.Load() {
		h.paceCounted.Store(false)
		h.s.readers.Add(-1)
	}
}
