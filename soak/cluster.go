package soak

import (
	"fmt"
	"sort"
)

// The cluster ledger: one upstream fetch per chunk across the cluster.
//
// With a shared store, a proxy fetches from upstream only what no proxy has
// put in the store yet; the rest it reads from the store. Each proxy still
// has a hub of its own (the same content and history, so the same etags,
// which are what the store is keyed by), so every upstream byte is still
// attributed to the proxy it went to, and the per-proxy bound (ledger.go)
// still holds. The cluster bound sums the complete answers of every proxy's
// hub, per 64 KiB block of every blob: a block is fetched once per cluster
// life of its blob, where the lives are
//
//	1 + times a proxy dropped the file from the store (it failed verification)
//	  + kills that found it partial (a chunk fetched but not yet put dies
//	    with its proxy)
//
// Local evictions are no lives here: an evicted blob is read back from the
// store. The bytes beyond must be explained, per file, by the per-proxy
// terms summed over the proxies (cut in flight, failed for space, spoiled
// by faults at any hub, sparse reads, reads on a full disk) and by the
// store's own events, each worth at most one chunk: a claim taken over
// from a silent owner, a wait given up, a put that failed, a stored object
// found wrong or unreadable and deleted. Answers a proxy asked for while it
// served around the store (its breaker open: the store down, cut off or
// too slow) are left out of the bound and reported as such: then each
// proxy fetches for itself, as without a store.

// sharedTerms is what the proxies' store events explain, cluster-wide: a
// file one proxy drops from the store is fetched anew by every proxy that
// reads it next, and a chunk event costs whoever needs the chunk next.
type sharedTerms struct {
	forgets map[string]int // etag → times the file was dropped from the store
	chunks  map[string]int // etag → store events that may each cost one chunk
	other   map[string]int // message → unclassified shared-store lines
}

func clusterTerms(procs []*proxy) *sharedTerms {
	sh := &sharedTerms{forgets: map[string]int{}, chunks: map[string]int{}, other: map[string]int{}}
	for _, p := range procs {
		ev := p.sink.storeEvents()
		for k, n := range ev.forgets {
			sh.forgets[k] += n
		}
		for k, n := range ev.chunks {
			sh.chunks[k] += n
		}
		for k, n := range ev.other {
			sh.other[k] += n
		}
	}
	return sh
}

// offStoreBytes sums, per file key, the complete answers l's proxy asked
// for while it served around the store.
func (l *ledger) offStoreBytes(ev storeEvents) map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int64{}
	for _, a := range l.complete {
		if ev.offStore(a.at) {
			out[a.b.key] += spanBytes(a.spans)
		}
	}
	return out
}

func spanBytes(spans [][2]int64) int64 {
	var n int64
	for _, sp := range spans {
		n += sp[1] - sp[0]
	}
	return n
}

// clusterLine is the cluster ledger's totals, for the report.
type clusterLine struct {
	through, around int64 // complete-answer bytes: through the store's claims, around the store
	firsts          int64 // bytes of blocks fetched at least once (through the store)
	total           excess
	events, forgets int
}

// checkCluster applies the cluster bound over procs and returns its totals.
func (s *soak) checkCluster(procs []*proxy) clusterLine {
	sh := clusterTerms(procs)
	var line clusterLine
	cover := map[string]coverage{}
	lives := map[string]int64{}
	byKey := map[string]*excess{}
	slot := func(key string) *excess {
		e := byKey[key]
		if e == nil {
			e = &excess{key: key}
			byKey[key] = e
		}
		return e
	}
	for _, p := range procs {
		ev := p.sink.storeEvents()
		_, _, noSpace := p.sink.counts()
		faults := p.up.hub.FaultCountsByPath()
		l := p.ledger
		l.mu.Lock()
		for _, a := range l.complete {
			n := spanBytes(a.spans)
			if ev.offStore(a.at) {
				line.around += n
				continue
			}
			line.through += n
			slot(a.b.key).complete += n
			c := cover[a.b.etag]
			if c == nil {
				c = coverage{}
				cover[a.b.etag] = c
			}
			for _, sp := range a.spans {
				c.add(sp[0], sp[1])
			}
		}
		for etag, n := range l.kills {
			lives[etag] += int64(n)
		}
		for etag, n := range l.lost {
			if b := s.w.blob(etag); b != nil {
				slot(b.key).lost += n
			}
		}
		for etag, n := range noSpace {
			if b := s.w.blob(etag); b != nil {
				slot(b.key).noSpace += int64(n) * chunkSize
			}
		}
		for key, n := range l.sparse {
			slot(key).sparse += n
		}
		for key, n := range l.bypass {
			slot(key).bypass += n
		}
		l.mu.Unlock()
		for _, kind := range []string{"WrongContentRange", "IgnoreRange", "CorruptBytes", "StallBody"} {
			for key, n := range faults[kind] {
				if key != "" {
					slot(key).spoiled += n * s.w.keySize(key)
				}
			}
		}
	}
	for _, b := range s.w.allBlobs() {
		e := slot(b.key)
		c := cover[b.etag]
		l := 1 + int64(sh.forgets[b.etag]) + lives[b.etag]
		refetch := c.excess(b.size(), l)
		e.refetch += refetch
		e.store += int64(sh.chunks[b.etag]) * chunkSize
		line.events += sh.chunks[b.etag]
		line.forgets += sh.forgets[b.etag]
		for blk, n := range c {
			line.firsts += min(n, min(ledgerBlock, b.size()-blk*ledgerBlock))
		}
		if refetch > 0 {
			e.detail += fmt.Sprintf(" [%.8s: %d B, %d cluster lives, %d refetched, %d store events]", b.etag, b.size(), l, refetch, sh.chunks[b.etag])
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := byKey[k]
		e.slack = e.lost + e.noSpace + e.spoiled + e.sparse + e.bypass + e.store
		t := &line.total
		t.complete += e.complete
		t.refetch += e.refetch
		t.slack += e.slack
		t.lost += e.lost
		t.noSpace += e.noSpace
		t.spoiled += e.spoiled
		t.sparse += e.sparse
		t.bypass += e.bypass
		t.store += e.store
		if e.refetch > e.slack {
			s.fail("refetch", fmt.Sprintf("cluster: %s: %d bytes fetched again within a cluster life (one fetch per chunk across the proxies), %d explained (%d cut in flight, %d failed for space, %d spoiled, %d sparse, %d full-disk, %d store events):%s",
				k, e.refetch, e.slack, e.lost, e.noSpace, e.spoiled, e.sparse, e.bypass, e.store, e.detail))
		}
	}
	for msg, n := range sh.other {
		s.events.add("store", fmt.Sprintf("unclassified shared-store log line (%d times): %s", n, msg))
	}
	return line
}
