package soak

import (
	"fmt"
	"sort"
	"time"
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
	forgets    map[string]int         // etag → times the file was dropped from the store
	forgetAt   map[string][]time.Time // etag → when
	chunks     map[string]int         // etag → store events that may each cost one chunk
	chunkSpans map[string][][2]int64  // etag → the chunk each names
	chunkLoose map[string]int         // etag → chunk events that name no chunk
	other      map[string]int         // message → unclassified shared-store lines
}

func clusterTerms(procs []*proxy) *sharedTerms {
	sh := &sharedTerms{forgets: map[string]int{}, forgetAt: map[string][]time.Time{}, chunks: map[string]int{},
		chunkSpans: map[string][][2]int64{}, chunkLoose: map[string]int{}, other: map[string]int{}}
	for _, p := range procs {
		ev := p.sink.storeEvents()
		for k, n := range ev.forgets {
			sh.forgets[k] += n
		}
		for k, ts := range ev.forgetAt {
			sh.forgetAt[k] = append(sh.forgetAt[k], ts...)
		}
		for k, n := range ev.chunks {
			sh.chunks[k] += n
		}
		for k, sp := range ev.chunkSpans {
			sh.chunkSpans[k] = append(sh.chunkSpans[k], sp...)
		}
		for k, n := range ev.chunkLoose {
			sh.chunkLoose[k] += n
		}
		for k, n := range ev.other {
			sh.other[k] += n
		}
	}
	return sh
}

// addTo adds the store's events to a book: each drop of a file ends a life
// of it, each chunk event explains one refetch of its chunk's blocks (of
// some chunk's, when its key names none).
func (sh *sharedTerms) addTo(bk *book, w *world) {
	for etag, ts := range sh.forgetAt {
		if b := w.blob(etag); b != nil {
			bk.lives[etag] = append(bk.lives[etag], ts...)
			bk.counts[termLives][b.key] += int64(len(ts))
		}
	}
	for etag, spans := range sh.chunkSpans {
		if b := w.blob(etag); b != nil {
			for _, sp := range spans {
				bk.span(termStore, etag, sp[0], sp[1])
			}
			bk.counts[termStore][b.key] += int64(len(spans))
		}
	}
	for etag, n := range sh.chunkLoose {
		if b := w.blob(etag); b != nil {
			bk.floating[b.key] = append(bk.floating[b.key], floatCredit{t: termStore, n: int64(n), blocks: chunkSize / ledgerBlock})
			bk.counts[termStore][b.key] += int64(n)
		}
	}
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
	bk := newBook()
	sh.addTo(bk, s.w)
	for _, p := range procs {
		ev := p.sink.storeEvents()
		// Every term but the local cache's lives: an evicted blob is
		// read back from the store.
		p.sink.addTo(bk, s.w, false)
		p.ledger.addFaults(bk)
		l := p.ledger
		l.mu.Lock()
		for _, a := range l.answers {
			n := spanBytes(a.spans)
			if ev.offStore(a.at) {
				line.around += n
				continue
			}
			line.through += n
			bk.answers[a.b.etag] = append(bk.answers[a.b.etag], a)
		}
		l.addTo(bk)
		l.mu.Unlock()
	}
	byKey := bk.settle(s.w)
	for _, b := range s.w.allBlobs() {
		line.events += sh.chunks[b.etag]
		line.forgets += sh.forgets[b.etag]
		c := coverage{}
		for _, a := range bk.answers[b.etag] {
			for _, sp := range a.spans {
				c.add(sp[0], sp[1])
			}
		}
		for blk, n := range c {
			line.firsts += min(n, blockLen(b.size(), blk))
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := byKey[k]
		line.total.add(e)
		if e.refetch > e.explained {
			s.fail("refetch", fmt.Sprintf("cluster: %s: %d bytes fetched again (one fetch per chunk across the proxies), %d explained (credited: %s):%s",
				k, e.refetch, e.explained, e.grantedLine(), e.detail))
		}
	}
	for msg, n := range sh.other {
		s.events.add("store", fmt.Sprintf("unclassified shared-store log line (%d times): %s", n, msg))
	}
	return line
}
