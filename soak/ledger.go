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
// fills. The ledger counts, per 64 KiB block of every blob, the bytes of it
// that complete answers carried. A block is fetched at most once per life of
// its blob in the cache, where a blob's lives are
//
//	1 + evictions + failed promotions + kills that found it partial
//
// (evictions and failed promotions read from the proxy's own log at debug
// level, so this checks fills, not the eviction policy; a kill ends a life
// when the blob was partial, as its partial files on disk just after the
// kill show: in-flight and unrecorded bytes are fetched again). The bytes
// beyond that, per file, must be explained by
//
//	lost + noSpace·chunk + spoiled·size + sparse + fullDisk
//
// where
//   - lost is the bytes of answers that were in flight at the relay when a
//     connection ended (a partition, a kill, a reset): the hub counts bytes
//     it handed to the kernel, which the proxy may never have read;
//   - noSpace·chunk: a fill that failed for want of disk space wasted at most
//     its one request (chunk-size);
//   - spoiled·size: answers a WrongContentRange, IgnoreRange, CorruptBytes or
//     StallBody fault hit on the file may be complete yet unusable, each at
//     most the whole file (resets and truncations never complete);
//   - sparse: column shards read around the cache by design, each at most
//     the tensor's bytes (and multipart framing);
//   - fullDisk: a read that overlapped a full disk (from the filler's
//     creation to 5 s after its removal) may be served straight from
//     upstream, each at most the whole file.
type ledger struct {
	w       *world
	hub     *hubtest.Hub
	hubHost string // requests through these relays are this proxy's
	cdnHost string

	mu        sync.Mutex       // guards the fields below
	completeB map[string]int64 // etag → content bytes of complete answers
	cover     map[string]coverage
	sent      map[string]int64 // etag → content bytes of all answers
	lost      map[string]int64 // etag → answer bytes in flight when a relayed connection ended
	kills     map[string]int   // etag → kills that found it partial
	sparse    map[string]int64 // key → bytes sparse reads may fetch around the cache
	bypass    map[string]int64 // key → bytes reads that overlapped a full disk may fetch
	unnamed   int64            // content bytes the ledger could not attribute (must stay 0)
	unnamedEx []string         // a few of their requests, to show
	full      []window         // full-disk windows
	answers   int64
	// With a shared store: every complete answer, timed, for the cluster
	// ledger (cluster.go), which must tell the answers a proxy asked for
	// while it served around the store from those it asked for through it.
	shared   bool
	complete []answerRec
}

// answerRec is one complete answer: a blob's spans, and when it ended.
type answerRec struct {
	b     *blobFix
	spans [][2]int64
	at    time.Time
}

// window is a stretch of time; end is zero while it lasts.
type window struct{ start, end time.Time }

func newLedger(w *world, h *hubtest.Hub, hubHost, cdnHost string) *ledger {
	return &ledger{w: w, hub: h, hubHost: hubHost, cdnHost: cdnHost,
		completeB: map[string]int64{}, cover: map[string]coverage{}, sent: map[string]int64{}, lost: map[string]int64{}, kills: map[string]int{},
		sparse: map[string]int64{}, bypass: map[string]int64{}}
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
	l.answers++
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
		if l.shared {
			l.complete = append(l.complete, answerRec{b: b, spans: spans, at: time.Now()})
		}
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
		for _, fix := range l.w.repos {
			if tail, ok := strings.CutPrefix(rest, fix.repo.Type().Plural()+"/"+fix.repo.ID()+"/"); ok {
				commit, pathEsc, _ := strings.Cut(tail, "/")
				p, _ := url.PathUnescape(pathEsc)
				return l.w.fileAt(fix.repo, commit, p)
			}
		}
		return nil
	}
	for _, fix := range l.w.repos {
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

// relayLost takes an answer that was in flight when its connection ended.
func (l *ledger) relayLost(reqLine string, n int64) {
	fields := strings.Fields(reqLine)
	if len(fields) < 2 {
		return
	}
	path, query, _ := strings.Cut(fields[1], "?")
	if b := l.blobFor(path, query); b != nil {
		l.mu.Lock()
		l.lost[b.etag] += n
		l.mu.Unlock()
	}
}

// killed records the partials found on disk right after a kill.
func (l *ledger) killed(etags []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range etags {
		l.kills[e]++
	}
}

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

// opEnded takes an op of the workload sent to this proxy.
func (l *ledger) opEnded(o *op, r *result) {
	if len(o.files) == 0 {
		return
	}
	end := r.done
	if end.IsZero() {
		end = time.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	overlap := false
	for _, w := range l.full {
		if !w.start.After(end) && (w.end.IsZero() || !w.end.Before(r.sent)) {
			overlap = true
		}
	}
	for i, f := range o.files {
		key := o.repo.String() + "/" + f
		if overlap {
			l.bypass[key] += l.w.keySize(key)
		}
		if i == 0 && o.sparse > 0 {
			l.sparse[key] += o.sparse + 64<<10
		}
	}
}

// excess is one file's refetched bytes, against what explains them.
type excess struct {
	key                      string
	complete, refetch, slack int64
	// The slack's parts.
	lost, noSpace, spoiled, sparse, bypass int64
	// With a shared store: chunks the store's events explain (a claim
	// taken over, a put that failed, a wrong object deleted, …), and bytes
	// asked for while the proxy served around the store.
	store, offStore int64
	detail          string
}

// check applies the bound with the proxy's log counts and the hub's
// faults, and returns the files that break it, and the totals. With a
// shared store, sh adds what the store explains (sharedTerms).
func (l *ledger) check(sink *logSink, sh *sharedTerms) (bad []excess, total excess) {
	evictions, discards, noSpace := sink.counts()
	faults := l.hub.FaultCountsByPath()
	off := map[string]int64{}
	if sh != nil {
		off = l.offStoreBytes(sink.storeEvents())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	byKey := map[string]*excess{}
	for _, b := range l.w.allBlobs() {
		e := byKey[b.key]
		if e == nil {
			e = &excess{key: b.key}
			byKey[b.key] = e
		}
		lives := int64(1 + evictions[b.etag] + discards[b.etag] + l.kills[b.etag])
		if sh != nil {
			// A file dropped from the store is fetched anew by whoever
			// reads it next, this proxy included, whole chunks at a time.
			lives += int64(sh.forgets[b.etag])
			n := int64(sh.chunks[b.etag]) * chunkSize
			e.store += n
			e.slack += n
		}
		refetch := l.cover[b.etag].excess(b.size(), lives)
		e.complete += l.completeB[b.etag]
		e.refetch += refetch
		e.lost += l.lost[b.etag]
		e.noSpace += int64(noSpace[b.etag]) * chunkSize
		e.slack += l.lost[b.etag] + int64(noSpace[b.etag])*chunkSize
		e.detail += fmt.Sprintf(" [%.8s: %d B, %d lives, %d complete, %d refetched, %d lost, %d failed for space]",
			b.etag, b.size(), lives, l.completeB[b.etag], refetch, l.lost[b.etag], noSpace[b.etag])
	}
	for key, e := range byKey {
		var n int64
		for _, kind := range []string{"WrongContentRange", "IgnoreRange", "CorruptBytes", "StallBody"} {
			n += faults[kind][key]
		}
		e.offStore = off[key]
		e.slack += off[key]
		e.spoiled, e.sparse, e.bypass = n*l.w.keySize(key), l.sparse[key], l.bypass[key]
		e.slack += e.spoiled + e.sparse + e.bypass
		e.detail += fmt.Sprintf(" + %d spoiling faults, %d sparse, %d full-disk, %d store events, %d off the store", n, l.sparse[key], l.bypass[key], e.store, e.offStore)
		total.complete += e.complete
		total.refetch += e.refetch
		total.slack += e.slack
		total.lost += e.lost
		total.noSpace += e.noSpace
		total.spoiled += e.spoiled
		total.sparse += e.sparse
		total.bypass += e.bypass
		total.store += e.store
		total.offStore += e.offStore
		if e.refetch > e.slack {
			bad = append(bad, *e)
		}
	}
	sort.Slice(bad, func(i, j int) bool { return bad[i].key < bad[j].key })
	if l.unnamed > 0 {
		bad = append(bad, excess{key: "(unattributed)", refetch: l.unnamed,
			detail: " content bytes the ledger could not name, e.g. " + strings.Join(l.unnamedEx, " ")})
	}
	return bad, total
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
