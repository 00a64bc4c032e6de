package soak

import (
	"maps"
	"slices"
	"time"
)

// storeEvents is what one proxy logged about the shared store, across its
// incarnations: the stretches when it served around the store, and the
// events that may each cost the cluster one more upstream fetch of a chunk
// or of a whole file. The byte ledger reads them (cluster.go); they are
// hubproxy's own account, and the ledger trusts only what they can explain:
// each names the chunk or file it concerns.
type storeEvents struct {
	// down are the stretches the proxy's breaker kept it off the store,
	// from its "failing" line to its "answers again" line (or the end of
	// the incarnation); end is zero while open.
	down []window
	// chunks counts, per etag, events after which a chunk of it may be
	// fetched upstream once more in the cluster: a claim taken over from
	// a silent owner, a wait given up, a put that failed, a stored object
	// found wrong or unreadable and deleted, a read that went around the
	// store for want of room, a reader that fetched its bytes of a chunk
	// itself while another node was slow to deliver it.
	chunks map[string]int
	// slow counts, per etag, the last of those: the readers that read
	// around a slow owner (the slow-owner phase checks it ran).
	slow map[string]int
	// forgets counts, per etag, the times the proxy dropped every chunk
	// of the file from the store after it failed verification: the
	// cluster fetches it again from scratch.
	forgets map[string]int
	// The byte ledger's view of the same: the chunk each chunk event names
	// (chunkSpans; chunkLoose counts those whose key names none), and when
	// each drop of a file was logged.
	chunkSpans map[string][][2]int64
	chunkLoose map[string]int
	forgetAt   map[string][]time.Time
	// other counts shared-store lines the ledger knows no meaning of, by
	// message: shown in the report, so a new kind is noticed.
	other map[string]int
}

func newStoreEvents() storeEvents {
	return storeEvents{chunks: map[string]int{}, slow: map[string]int{}, forgets: map[string]int{}, other: map[string]int{},
		chunkSpans: map[string][][2]int64{}, chunkLoose: map[string]int{}, forgetAt: map[string][]time.Time{}}
}

// The messages, as internal/sharedfill and internal/app log them.
var (
	storeDownMsgs = []string{
		"shared store failing; serving from upstream until it answers",
		"shared store not answering at start; serving from upstream until it does",
	}
	storeUpMsg        = "shared store answers again; sharing chunks through it"
	storeSlowOwnerMsg = "shared store: another node is slow to deliver a chunk; reading around it"
	storeChunkMsgs    = []string{
		"shared store: a chunk's owner went silent; taking it over",
		"shared store: skipping a long-dead claim",
		"shared store: gave up waiting for another node's chunk; fetching it here",
		"shared store: could not put a chunk",
		"shared store: chunk object has the wrong size; deleting it",
		"shared store: chunk object does not match its digest; deleting it",
		"shared store: chunk object cannot be read back; deleting it",
		"shared store: too many chunks in flight; fetching around the store",
		// A waiting reader past FallbackAfter fetches the rest of its
		// range of the chunk from upstream (at most the chunk: the
		// fallback block is larger), while the owner still fetches the
		// whole of it: one more fetch of the chunk's blocks per line.
		storeSlowOwnerMsg,
	}
	storeForgetMsgs = []string{
		"shared store: dropped the chunks of a file that failed verification; it will be fetched anew",
		"shared store: could not drop the chunks of a file that failed verification",
		// An attempt that failed may have dropped some chunks, which the
		// cluster then fetches again: each counts as a drop.
		"shared store: could not drop the chunks of a file that failed verification; trying again",
	}
	// storeQuietMsgs change nothing upstream.
	storeQuietMsgs = []string{
		"sharing chunks with the cluster through the shared store",
		"shared store: renewing a chunk claim failed", // a waiter taking over logs that
		"shared store: deleting a claim",
		// A claim whose delete failed is deleted once the store answers
		// again (internal/sharedfill's orphans.go): the chunk it guarded
		// was put, or its failed fetch logged an event of its own.
		"shared store: deleting a claim failed; trying again later",
		"shared store: deleted a claim left behind by an outage",
	}
)

// note takes one shared-store line, received at now. Callers hold the
// sink's lock.
func (ev *storeEvents) note(e logEntry, now time.Time) {
	etag := e.ETag
	if etag == "" {
		etag = keyETag(e.Key)
	}
	switch {
	case slices.Contains(storeDownMsgs, e.Msg):
		if n := len(ev.down); n == 0 || !ev.down[n-1].end.IsZero() {
			ev.down = append(ev.down, window{start: now})
		}
	case e.Msg == storeUpMsg:
		ev.closeDown(now)
	case slices.Contains(storeChunkMsgs, e.Msg):
		ev.chunks[etag]++
		if e.Msg == storeSlowOwnerMsg {
			ev.slow[etag]++
		}
		if a, b, ok := keyChunk(e.Key); ok {
			ev.chunkSpans[etag] = append(ev.chunkSpans[etag], [2]int64{a, b})
		} else {
			ev.chunkLoose[etag]++
		}
	case slices.Contains(storeForgetMsgs, e.Msg):
		ev.forgets[etag]++
		ev.forgetAt[etag] = append(ev.forgetAt[etag], now)
	case slices.Contains(storeQuietMsgs, e.Msg):
	default:
		ev.other[e.Msg]++
	}
}

// closeDown ends an open down stretch at t.
func (ev *storeEvents) closeDown(t time.Time) {
	if n := len(ev.down); n > 0 && ev.down[n-1].end.IsZero() {
		ev.down[n-1].end = t
	}
}

func (ev *storeEvents) clone() storeEvents {
	out := storeEvents{down: append([]window(nil), ev.down...), chunks: maps.Clone(ev.chunks), slow: maps.Clone(ev.slow),
		forgets: maps.Clone(ev.forgets), other: maps.Clone(ev.other), chunkLoose: maps.Clone(ev.chunkLoose),
		chunkSpans: map[string][][2]int64{}, forgetAt: map[string][]time.Time{}}
	for k, v := range ev.chunkSpans {
		out.chunkSpans[k] = slices.Clone(v)
	}
	for k, v := range ev.forgetAt {
		out.forgetAt[k] = slices.Clone(v)
	}
	return out
}

// storeGrace widens a down stretch: the first line may reach the driver a
// moment after the proxy turned to upstream, and an answer the proxy asked
// for while it was off the store may finish after it came back (the hub
// reports an answer when it ends). A fill's answer is at most a chunk;
// even at the slowest bandwidth cap and the longest stall that finishes
// within this.
const storeGrace = 10 * time.Second

// offStore reports whether an answer that ended at t may have been asked
// for while the proxy served around the store.
func (ev *storeEvents) offStore(t time.Time) bool {
	for _, w := range ev.down {
		if w.offStore(t) {
			return true
		}
	}
	return false
}

// downDuring reports whether the proxy served around the store at any time
// in [a, b].
func (ev *storeEvents) downDuring(a, b time.Time) bool {
	for _, w := range ev.down {
		if !w.start.After(b) && (w.end.IsZero() || !w.end.Before(a)) {
			return true
		}
	}
	return false
}

// offStore reports whether an answer that ended at t may have been asked
// for during the down stretch w.
func (w window) offStore(t time.Time) bool {
	return t.After(w.start.Add(-time.Second)) && (w.end.IsZero() || t.Before(w.end.Add(storeGrace)))
}

// keyETag is the etag in a store key as the proxies log it
// (v4/<shard>/chunks/<etag>/… or v4/<shard>/claims/<etag>/…).
func keyETag(key string) string {
	k, _ := parseLayoutKey(key)
	return k.etag
}

// keyChunk is the byte span of the chunk a store key names.
func keyChunk(key string) (a, b int64, ok bool) {
	k, ok := parseLayoutKey(key)
	if !ok {
		return 0, 0, false
	}
	return k.index * k.size, (k.index + 1) * k.size, true
}

// storeEnded closes the store's down stretch with the incarnation.
func (s *logSink) storeEnded(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.store.closeDown(t)
}

// storeEvents returns a copy of what the proxy logged about the store.
func (s *logSink) storeEvents() storeEvents {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store.clone()
}
