package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The byte ledger's credits: per block, never per file.
//
// A block of a blob may come from upstream once; every further complete
// answer that carries it must be explained by an event that touched that
// very block, and each event explains at most one more fetch of each block
// it touched. So an eviction of a file explains one refetch of the blocks
// fetched in the life it ended, not a whole file's worth of bytes that any
// block may spend, and a read that overlapped a full disk explains one
// refetch of the blocks it asked for, not of the whole file. (A bound that
// pooled the credits per file let one event pay for a file read from
// upstream over and over: a 45 s run fetched 231 MiB again against 14 MiB
// of distinct content and passed.)
//
// The events, by the term of the report they count under:
//
//   - lives: an eviction, a failed promotion, a kill that found the blob
//     partial, a drop of its chunks from the shared store: each ends a life
//     of the blob in the cache, and explains one refetch of every block a
//     complete answer carried since the previous such event, up to the
//     moment the driver noted it (lifeGrace earlier, for the log line's way
//     to the driver: an answer just before it may have been after the
//     event before);
//   - cut in flight: an answer the relay saw end before its last byte
//     explains one refetch of the blocks its Range asked for;
//   - failed for space: a fill that failed for want of disk space explains
//     one refetch of the blocks it had not written ([at, end) of its log
//     line);
//   - spoiled: a 200 to a ranged request (IgnoreRange) explains itself, as
//     many as the fault fired on the file; every other spoiling fault
//     (WrongContentRange, CorruptBytes, StallBody) may have hit any one
//     complete answer of the file, so it explains one refetch of at most as
//     many blocks as the largest such answer carried, the ones with the
//     most left to explain;
//   - sparse: a column shard, read around the cache by design, explains one
//     refetch of the blocks of its tensor;
//   - around the cache: a read that overlapped a full disk, or a refusal of
//     another caller's fill (access changing within its window), may go
//     straight to upstream: one refetch of the blocks it asked for;
//   - store events: a chunk event of the shared store explains one refetch
//     of that chunk's blocks;
//   - off the store: a stretch the proxy served around the shared store
//     (its fills went to upstream, some for blocks a whole chunk fetched
//     for the store had carried before: the store serves whole chunks, the
//     cache fills blocks) explains one refetch of each block fetched in it.
type term int

const (
	termLives term = iota
	termLost
	termNoSpace
	termSpoiled
	termSparse
	termBypass
	termStore
	termOffStore
	numTerms
)

var termNames = [numTerms]string{"lives ended", "cut in flight", "failed for space", "spoiled by faults", "sparse reads",
	"reads around the cache", "store events", "stretches off the store"}

// lifeGrace widens the stretch whose fetches a life-ending event explains,
// back into the one before: a log line reaches the driver a moment after
// the fact.
const lifeGrace = 5 * time.Second

// floatCredit is n events that each explain one refetch of at most blocks
// distinct blocks of one blob of a file (0: as many as the file's largest
// complete answer carried).
type floatCredit struct {
	t      term
	n      int64
	blocks int64
}

// book gathers what one bound (a proxy's, or the cluster's) is checked on.
type book struct {
	answers  map[string][]answerRec          // etag → complete answers
	lives    map[string][]time.Time          // etag → life-ending events
	spans    [numTerms]map[string][][2]int64 // term → etag → spans that each explain one refetch of their blocks
	floating map[string][]floatCredit        // file key → credits that may fall on any of its blobs' blocks
	ignored  map[string]int64                // file key → IgnoreRange faults
	counts   [numTerms]map[string]int64      // term → file key → events, for the detail
}

func newBook() *book {
	bk := &book{answers: map[string][]answerRec{}, lives: map[string][]time.Time{},
		floating: map[string][]floatCredit{}, ignored: map[string]int64{}}
	for t := range numTerms {
		bk.spans[t] = map[string][][2]int64{}
		bk.counts[t] = map[string]int64{}
	}
	return bk
}

// span credits one refetch of the blocks [a, b) touches, of blob etag.
func (bk *book) span(t term, etag string, a, b int64) {
	if b > a {
		bk.spans[t][etag] = append(bk.spans[t][etag], [2]int64{a, b})
	}
}

// blockLen is the length of block blk of a blob of size bytes.
func blockLen(size, blk int64) int64 { return max(0, min(ledgerBlock, size-blk*ledgerBlock)) }

// blocksOf calls fn for every block [a, b) touches within size.
func blocksOf(a, b, size int64, fn func(blk int64)) {
	for blk := max(a, 0) / ledgerBlock; blk*ledgerBlock < min(b, size); blk++ {
		fn(blk)
	}
}

// lifeCredits is, per block, the refetches the life-ending events explain:
// each event, one refetch of every block fetched since the event before.
func lifeCredits(answers []answerRec, events []time.Time, size int64) map[int64]int64 {
	out := map[int64]int64{}
	if len(events) == 0 {
		return out
	}
	evs := append([]time.Time(nil), events...)
	sort.Slice(evs, func(i, j int) bool { return evs[i].Before(evs[j]) })
	for i, at := range evs {
		lo := time.Time{}
		if i > 0 {
			lo = evs[i-1].Add(-lifeGrace)
		}
		hi := at
		seen := map[int64]bool{}
		for _, a := range answers {
			if !a.at.After(lo) || a.at.After(hi) {
				continue
			}
			for _, sp := range a.spans {
				blocksOf(sp[0], sp[1], size, func(blk int64) {
					if !seen[blk] {
						seen[blk] = true
						out[blk]++
					}
				})
			}
		}
	}
	return out
}

// blobBook is one blob's fetches and credits while the book settles.
type blobBook struct {
	b       *blobFix
	fetched coverage
	credits map[int64]int64
	resid   map[int64]int64 // bytes left unexplained per block
}

// settle applies the credits and returns, per file key, what was fetched
// again and what the credits left unexplained.
func (bk *book) settle(w *world) map[string]*excess {
	byKey := map[string]*excess{}
	slot := func(key string) *excess {
		e := byKey[key]
		if e == nil {
			e = &excess{key: key}
			byKey[key] = e
		}
		return e
	}
	books := map[string][]*blobBook{} // key → its blobs
	for _, b := range w.allBlobs() {
		e := slot(b.key)
		bb := &blobBook{b: b, fetched: coverage{}, credits: map[int64]int64{}, resid: map[int64]int64{}}
		books[b.key] = append(books[b.key], bb)
		size := b.size()
		for _, a := range bk.answers[b.etag] {
			for _, sp := range a.spans {
				bb.fetched.add(sp[0], sp[1])
				e.complete += sp[1] - sp[0]
			}
		}
		grant := func(t term, blk int64) {
			bb.credits[blk]++
			e.granted[t] += blockLen(size, blk)
		}
		for blk, n := range lifeCredits(bk.answers[b.etag], bk.lives[b.etag], size) {
			for range n {
				grant(termLives, blk)
			}
		}
		for t := range numTerms {
			for _, sp := range bk.spans[t][b.etag] {
				blocksOf(sp[0], sp[1], size, func(blk int64) { grant(t, blk) })
			}
		}
	}
	for key, bbs := range books {
		e := slot(key)
		// IgnoreRange: the whole-file answers to ranged requests explain
		// themselves, as many as the fault fired.
		left := bk.ignored[key]
		for _, bb := range bbs {
			for _, a := range bk.answers[bb.b.etag] {
				if left > 0 && a.ignored {
					left--
					blocksOf(0, bb.b.size(), bb.b.size(), func(blk int64) {
						bb.credits[blk]++
						e.granted[termSpoiled] += blockLen(bb.b.size(), blk)
					})
				}
			}
		}
		for _, bb := range bbs {
			size := bb.b.size()
			for blk, got := range bb.fetched {
				l := blockLen(size, blk)
				e.refetch += max(0, got-l)
				if r := got - l*(1+bb.credits[blk]); r > 0 {
					bb.resid[blk] = r
				}
			}
		}
		widest := int64(1)
		for _, bb := range bbs {
			for _, a := range bk.answers[bb.b.etag] {
				if !a.ignored {
					widest = max(widest, answerBlocks(a, bb.b.size()))
				}
			}
		}
		for _, fc := range bk.floating[key] {
			n := fc.blocks
			if n <= 0 {
				n = widest
			}
			e.granted[fc.t] += fc.n * n * ledgerBlock
			for range fc.n {
				if !spendFloating(bbs, n) {
					break
				}
			}
		}
		var unexplained int64
		for _, bb := range bbs {
			var r int64
			for _, n := range bb.resid {
				r += n
			}
			unexplained += r
			if r > 0 {
				e.detail += blobDetail(bb, bk)
			}
		}
		e.explained = e.refetch - unexplained
		for t := range numTerms {
			if n := bk.counts[t][key]; n > 0 {
				e.detail += fmt.Sprintf(" %d %s;", n, termNames[t])
			}
		}
	}
	return byKey
}

// answerBlocks is how many distinct blocks an answer carried.
func answerBlocks(a answerRec, size int64) int64 {
	seen := map[int64]bool{}
	for _, sp := range a.spans {
		blocksOf(sp[0], sp[1], size, func(blk int64) { seen[blk] = true })
	}
	return int64(len(seen))
}

// spendFloating spends one floating credit of n blocks on the blob of the
// file that has the most left to explain in its n worst blocks, one fetch
// of each; it reports whether anything was left to explain.
func spendFloating(bbs []*blobBook, n int64) bool {
	var best *blobBook
	var bestBlocks []int64
	var bestSum int64
	for _, bb := range bbs {
		blks := make([]int64, 0, len(bb.resid))
		for blk := range bb.resid {
			blks = append(blks, blk)
		}
		sort.Slice(blks, func(i, j int) bool {
			if bb.resid[blks[i]] != bb.resid[blks[j]] {
				return bb.resid[blks[i]] > bb.resid[blks[j]]
			}
			return blks[i] < blks[j]
		})
		blks = blks[:min(int64(len(blks)), n)]
		var sum int64
		for _, blk := range blks {
			sum += min(bb.resid[blk], blockLen(bb.b.size(), blk))
		}
		if sum > bestSum {
			best, bestBlocks, bestSum = bb, blks, sum
		}
	}
	if best == nil {
		return false
	}
	for _, blk := range bestBlocks {
		if best.resid[blk] -= blockLen(best.b.size(), blk); best.resid[blk] <= 0 {
			delete(best.resid, blk)
		}
	}
	return true
}

// blobDetail says where a blob's unexplained bytes are: a few of its
// blocks, with their fetches and credits.
func blobDetail(bb *blobBook, bk *book) string {
	blks := make([]int64, 0, len(bb.resid))
	for blk := range bb.resid {
		blks = append(blks, blk)
	}
	sort.Slice(blks, func(i, j int) bool { return blks[i] < blks[j] })
	var parts []string
	for i, blk := range blks {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("… %d blocks in all", len(blks)))
			break
		}
		l := blockLen(bb.b.size(), blk)
		parts = append(parts, fmt.Sprintf("block %d: %.1f fetches, %d credits", blk, float64(bb.fetched[blk])/float64(l), bb.credits[blk]))
	}
	return fmt.Sprintf(" [%.8s: %d B, %d complete answers, %d life-ending events; %s]", bb.b.etag, bb.b.size(),
		len(bk.answers[bb.b.etag]), len(bk.lives[bb.b.etag]), strings.Join(parts, ", "))
}
