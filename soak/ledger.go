package soak

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// The byte ledger: no fill repeated beyond what faults and evictions explain.
//
// Each proxy has a hub of its own (identical content, identical history),
// so every upstream byte is attributed to one proxy. The hub reports every
// request it finishes (hubtest.SetRequestObserver), with the bytes it wrote.
// An answer is complete when it carried every byte its request asked for;
// only complete answers can have been stored, so only they can be repeated
// fills. The ledger keeps every complete answer, timed, and counts per
// 64 KiB block of every blob the bytes of it they carried. A block may come
// from upstream once; each further fetch of it must be explained by an
// event that touched that block, one fetch per event (credits.go lists the
// events: evictions, failed promotions and kills that found the blob
// partial, from the proxy's own log at debug level and its disk just after
// the kill; answers cut in flight at the relay; fills that failed for want
// of space; answers a fault spoiled; column shards, read around the cache
// by design; reads that overlapped a full disk or another caller's refused
// fill; and with a shared store, its events).
type ledger struct {
	w       *world
	hub     *hubtest.Hub
	hubHost string // requests through these relays are this proxy's
	cdnHost string
	// hist tells which heads a branch answer may have used and when access
	// changed; nil in tests that need neither.
	hist *history

	mu        sync.Mutex       // guards the fields below
	completeB map[string]int64 // etag → content bytes of complete answers
	cover     map[string]coverage
	sent      map[string]int64 // etag → content bytes of all answers
	answers   []answerRec      // every complete answer, timed
	lost      map[string]int64 // etag → answer bytes in flight when a relayed connection ended
	lostSpans map[string][][2]int64
	kills     map[string][]time.Time // etag → kills that found it partial
	lifeAt    map[string][]time.Time // etag → partials dropped without a log line (a bypassed whole read that failed its hash)
	// opSpans are, per term (sparse, bypass), the blocks ops asked for
	// that may have been fetched around the cache; opCounts count the ops.
	opSpans   [numTerms]map[string][][2]int64
	opCounts  [numTerms]map[string]int64
	unnamed   int64    // content bytes the ledger could not attribute (must stay 0)
	unnamedEx []string // a few of their requests, to show
	full      []window // full-disk windows
	seen      int64    // answers observed
	// With a shared store: the cluster ledger (cluster.go) tells the
	// answers a proxy asked for while it served around the store from
	// those it asked for through it, by their time.
	shared bool
}

// answerRec is one complete answer: a blob's spans, and when it ended.
// ignored marks a 200 to a ranged request (the IgnoreRange fault).
type answerRec struct {
	b       *blobFix
	spans   [][2]int64
	at      time.Time
	ignored bool
}

// window is a stretch of time; end is zero while it lasts.
type window struct{ start, end time.Time }

func newLedger(w *world, h *hubtest.Hub, hubHost, cdnHost string) *ledger {
	l := &ledger{w: w, hub: h, hubHost: hubHost, cdnHost: cdnHost,
		completeB: map[string]int64{}, cover: map[string]coverage{}, sent: map[string]int64{}, lost: map[string]int64{},
		lostSpans: map[string][][2]int64{}, kills: map[string][]time.Time{}, lifeAt: map[string][]time.Time{}}
	for t := range numTerms {
		l.opSpans[t] = map[string][][2]int64{}
		l.opCounts[t] = map[string]int64{}
	}
	return l
}

// observe takes one finished request from the hub.
func (l *ledger) observe(rec hubtest.RequestRecord) {
	if rec.Method != "GET" || (rec.Status != 200 && rec.Status != 206) || rec.Bytes == 0 {
		return
	}
	if rec.Host != l.hubHost && rec.Host != l.cdnHost {
		return // the foreign host: not the hub's bytes
	}
	b := l.blobFor(rec.Path, rec.Query)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen++
	if b == nil {
		if !strings.HasPrefix(rec.Path, "/api/") || strings.HasPrefix(rec.Path, "/api/resolve-cache/") {
			l.unnamed += rec.Bytes
			if len(l.unnamedEx) < 5 {
				l.unnamedEx = append(l.unnamedEx, rec.Host+rec.Path+"?"+rec.Query)
			}
		}
		return
	}
	l.sent[b.etag] += rec.Bytes
	if want, ok := wantBytes(rec, b.size()); ok && rec.Bytes >= want {
		l.completeB[b.etag] += rec.Bytes
		c := l.cover[b.etag]
		if c == nil {
			c = coverage{}
			l.cover[b.etag] = c
		}
		spans := answerSpans(rec, b.size())
		for _, sp := range spans {
			c.add(sp[0], sp[1])
		}
		l.answers = append(l.answers, answerRec{b: b, spans: spans, at: time.Now(),
			ignored: rec.Status == 200 && rec.Range != ""})
	}
}

// wantBytes is how many content bytes a complete answer to rec has. A
// multi-range answer counts as complete (its framing is not content, so
// this errs towards counting it).
func wantBytes(rec hubtest.RequestRecord, size int64) (int64, bool) {
	if rec.Status == 200 || rec.Range == "" {
		return size, true
	}
	spec, ok := strings.CutPrefix(rec.Range, "bytes=")
	if !ok {
		return size, true
	}
	if strings.Contains(spec, ",") {
		return 0, true
	}
	a, b, _ := strings.Cut(spec, "-")
	switch {
	case a == "":
		n, err := strconv.ParseInt(b, 10, 64)
		return min(n, size), err == nil
	case b == "":
		start, err := strconv.ParseInt(a, 10, 64)
		return size - start, err == nil
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	end, err2 := strconv.ParseInt(b, 10, 64)
	return min(end, size-1) - start + 1, err1 == nil && err2 == nil
}

// blobFor names the blob a content request is for: a CDN object by its
// sha256, a resolve-cache answer by its etag= query, a file the hub serves
// itself (a restricted repo's regular file) by repo, revision and path.
func (l *ledger) blobFor(path, query string) *blobFix {
	if sha, ok := strings.CutPrefix(path, "/blobs/"); ok {
		return l.w.blob(sha)
	}
	if rest, ok := strings.CutPrefix(path, "/api/resolve-cache/"); ok {
		// /api/resolve-cache/{type}s/{id}/{commit}/{path}[?etag=oid]
		q, _ := url.ParseQuery(query)
		if b := l.w.blob(q.Get("etag")); b != nil {
			return b
		}
		for _, fix := range l.w.allRepos() {
			if tail, ok := strings.CutPrefix(rest, fix.repo.Type().Plural()+"/"+fix.repo.ID()+"/"); ok {
				commit, pathEsc, _ := strings.Cut(tail, "/")
				p, _ := url.PathUnescape(pathEsc)
				return l.w.fileAt(fix.repo, commit, p)
			}
		}
		return nil
	}
	for _, fix := range l.w.allRepos() {
		rest, ok := strings.CutPrefix(path, "/"+fix.repo.String()+"/resolve/")
		if !ok {
			continue
		}
		revEsc, pathEsc, _ := strings.Cut(rest, "/")
		rev, _ := url.PathUnescape(revEsc)
		p, _ := url.PathUnescape(pathEsc)
		return l.w.fileAt(fix.repo, rev, p)
	}
	return nil
}

// relayLost takes an answer that was in flight when its connection ended:
// its request line and Range, the bytes of it that had passed, and whether
// the relay had passed all of it (then nothing was lost in flight; a proxy
// killed before reading it is the kill's to explain).
func (l *ledger) relayLost(reqLine, rng string, n int64, complete bool) {
	fields := strings.Fields(reqLine)
	if complete || len(fields) < 2 || fields[0] != "GET" {
		return
	}
	path, query, _ := strings.Cut(fields[1], "?")
	b := l.blobFor(path, query)
	if b == nil {
		return
	}
	status := 206
	if rng == "" {
		status = 200
	}
	spans := answerSpans(hubtest.RequestRecord{Status: status, Range: rng}, b.size())
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost[b.etag] += n
	l.lostSpans[b.etag] = append(l.lostSpans[b.etag], spans...)
}

// killed records the partials found on disk right after a kill. The hub
// records an answer when its handler returns, which for a fill in flight
// may be a moment after the kill: such answers are the kill's too.
func (l *ledger) killed(etags []string) {
	now := time.Now().Add(killGrace)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range etags {
		l.kills[e] = append(l.kills[e], now)
	}
}

// killGrace is how long after a kill the hub may still record an answer
// the killed proxy asked for.
const killGrace = time.Second

// diskFull and diskFree bracket a full disk.
func (l *ledger) diskFull(t time.Time) {
	l.mu.Lock()
	l.full = append(l.full, window{start: t})
	l.mu.Unlock()
}

func (l *ledger) diskFree(t time.Time) {
	l.mu.Lock()
	l.full[len(l.full)-1].end = t.Add(5 * time.Second)
	l.mu.Unlock()
}

// check applies the bound with the proxy's log and the hub's faults, and
// returns the files that break it, and the totals. With a shared store, sh
// adds what the store explains (sharedTerms).
func (l *ledger) check(sink *logSink, sh *sharedTerms) (bad []excess, total excess) {
	bk := newBook()
	var ev storeEvents
	if sh != nil {
		ev = sink.storeEvents()
		sh.addTo(bk, l.w)
	}
	sink.addTo(bk, l.w, true)
	l.addFaults(bk)
	l.mu.Lock()
	for _, a := range l.answers {
		bk.answers[a.b.etag] = append(bk.answers[a.b.etag], a)
	}
	// A stretch off the store is one event: the fills of it went to
	// upstream, some for blocks a chunk fetched whole for the store had
	// carried before (the store serves whole chunks, the cache fills
	// blocks), so it explains one refetch of each block fetched in it.
	for _, w := range ev.down {
		// Reads go around a failing store before the breaker's line says
		// so: from a whole grace before it.
		w.start = w.start.Add(-storeGrace)
		seen := map[string]map[int64]bool{}
		for _, a := range l.answers {
			if !w.offStore(a.at) {
				continue
			}
			if seen[a.b.etag] == nil {
				seen[a.b.etag] = map[int64]bool{}
				bk.counts[termOffStore][a.b.key]++
			}
			for _, sp := range a.spans {
				blocksOf(sp[0], sp[1], a.b.size(), func(blk int64) {
					if !seen[a.b.etag][blk] {
						seen[a.b.etag][blk] = true
						bk.span(termOffStore, a.b.etag, blk*ledgerBlock, blk*ledgerBlock+1)
					}
				})
			}
		}
	}
	l.addTo(bk)
	unnamed, unnamedEx := l.unnamed, l.unnamedEx
	l.mu.Unlock()
	byKey := bk.settle(l.w)
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := byKey[k]
		total.add(e)
		if e.refetch > e.explained {
			bad = append(bad, *e)
		}
	}
	if unnamed > 0 {
		bad = append(bad, excess{key: "(unattributed)", refetch: unnamed,
			detail: " content bytes the ledger could not name, e.g. " + strings.Join(unnamedEx, " ")})
	}
	return bad, total
}

// addTo adds the ledger's own events to bk: answers cut in flight, kills,
// silent drops and the ops that may have read around the cache. Callers
// hold l.mu.
func (l *ledger) addTo(bk *book) {
	for etag, spans := range l.lostSpans {
		b := l.w.blob(etag)
		bk.counts[termLost][b.key] += int64(len(spans))
		for _, sp := range spans {
			bk.span(termLost, etag, sp[0], sp[1])
		}
	}
	for _, m := range []map[string][]time.Time{l.kills, l.lifeAt} {
		for etag, ts := range m {
			if b := l.w.blob(etag); b != nil {
				bk.lives[etag] = append(bk.lives[etag], ts...)
				bk.counts[termLives][b.key] += int64(len(ts))
			}
		}
	}
	for _, t := range []term{termSparse, termBypass} {
		for etag, spans := range l.opSpans[t] {
			for _, sp := range spans {
				bk.span(t, etag, sp[0], sp[1])
			}
		}
		for key, n := range l.opCounts[t] {
			bk.counts[t][key] += n
		}
	}
}

// spoilers are the faults whose answers may be complete and unusable, but
// for IgnoreRange, whose answers the ledger recognises (a 200 to a Range).
var spoilers = []string{"WrongContentRange", "CorruptBytes", "StallBody"}

// addFaults adds the hub's spoiling faults to bk.
func (l *ledger) addFaults(bk *book) {
	faults := l.hub.FaultCountsByPath()
	for _, kind := range spoilers {
		for key, n := range faults[kind] {
			if key != "" && n > 0 {
				bk.floating[key] = append(bk.floating[key], floatCredit{t: termSpoiled, n: n})
				bk.counts[termSpoiled][key] += n
			}
		}
	}
	for key, n := range faults["IgnoreRange"] {
		bk.ignored[key] += n
		bk.counts[termSpoiled][key] += n
	}
}

// excess is one file's refetched bytes, against what explains them.
type excess struct {
	key string
	// complete is the bytes of complete answers; refetch, those beyond one
	// fetch per block; explained, how many of those the credits cover.
	complete, refetch, explained int64
	// granted is, per term, the block bytes its events credited.
	granted [numTerms]int64
	detail  string
}

func (e *excess) add(o *excess) {
	e.complete += o.complete
	e.refetch += o.refetch
	e.explained += o.explained
	for t := range numTerms {
		e.granted[t] += o.granted[t]
	}
}

// grantedLine renders the credits per term.
func (e *excess) grantedLine() string {
	var parts []string
	for t := range numTerms {
		if e.granted[t] > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", mib(e.granted[t]), termNames[t]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// sentBytes is the content bytes of every answer of one blob so far,
// complete or not.
func (l *ledger) sentBytes(etag string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent[etag]
}

// chunkBytes is the bytes complete answers carried of blob etag inside the
// chunks (of chunkSize) whose indexes are in chunks: those that ended while
// off(at) said the proxy served around the store apart (around).
func (l *ledger) chunkBytes(etag string, chunks map[int64]bool, off func(time.Time) bool) (through, around int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.answers {
		if a.b.etag != etag {
			continue
		}
		c := coverage{}
		for _, sp := range a.spans {
			c.add(sp[0], sp[1])
		}
		for blk, n := range c {
			switch {
			case !chunks[blk*ledgerBlock/chunkSize]:
			case off(a.at):
				around += n
			default:
				through += n
			}
		}
	}
	return through, around
}

// answersOf describes the complete answers of one blob: how many, and the
// first few, timed from t0.
func (l *ledger) answersOf(etag string, t0 time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	n := 0
	for _, a := range l.answers {
		if a.b.etag != etag {
			continue
		}
		if n++; n <= 6 {
			parts = append(parts, fmt.Sprintf("%v at %+.3fs", a.spans, a.at.Sub(t0).Seconds()))
		}
	}
	return fmt.Sprintf("%d complete answers: %s", n, strings.Join(parts, ", "))
}

// completeBytes is the complete-answer bytes of one blob so far.
func (l *ledger) completeBytes(etag string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.completeB[etag]
}

// fileAt is the blob at repo@rev:path, rev a commit or a branch (the
// latest commit that has the path, for a branch: the hub serves restricted
// repos' files itself only for repos that never move).
func (w *world) fileAt(repo hub.Repo, rev, path string) *blobFix {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if c := w.commits[rev]; c != nil {
		return c.files[path]
	}
	ids := w.order[repo]
	for i := len(ids) - 1; i >= 0; i-- {
		if b := w.commits[ids[i]].files[path]; b != nil {
			return b
		}
	}
	return nil
}
