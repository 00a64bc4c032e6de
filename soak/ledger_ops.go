package soak

import (
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// The byte ledger's view of the workload: the blocks each op may have made
// its proxy fetch around the cache.

// opEnded takes an op of the workload sent to this proxy: the blocks it
// asked for are what it may have fetched around the cache, when it
// overlapped a full disk or a change of access (another caller's fill
// refused, which hubproxy answers by reading straight from upstream), and
// a column shard's tensor is read around the cache by design.
func (l *ledger) opEnded(o *op, r *result) {
	if len(o.files) == 0 || o.rev == noSuchRev {
		return
	}
	end := r.done
	if end.IsZero() {
		end = time.Now()
	}
	from := r.sent.Add(-accessTTL - lateness)
	// A caller the hub refused the files throughout makes hubproxy read
	// nothing of them, around the cache or through it.
	mayRead := l.hist == nil || containsVerdict(l.hist.verdicts(o.caller, o.repo, true, from, end), verdict{allowed: true})
	around := mayRead && l.hist != nil && l.hist.accessChanged(o.repo, from, end)
	touched, sparse := l.touched(o, r, end)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.full {
		if mayRead && !w.start.After(end) && (w.end.IsZero() || !w.end.Before(r.sent)) {
			around = true
		}
	}
	key := o.repo.String() + "/" + o.files[0]
	if around {
		l.opCounts[termBypass][key]++
		for b, spans := range touched {
			l.opSpans[termBypass][b.etag] = append(l.opSpans[termBypass][b.etag], spans...)
			if b.key == l.w.corruptKey && r.status >= 500 {
				// A whole read that went around the cache and failed its
				// hash drops the partial without a log line.
				l.lifeAt[b.etag] = append(l.lifeAt[b.etag], end)
			}
		}
	}
	if o.sparse > 0 {
		l.opCounts[termSparse][key]++
		for b, spans := range sparse {
			l.opSpans[termSparse][b.etag] = append(l.opSpans[termSparse][b.etag], spans...)
		}
	}
}

// touched is the blocks op may have read, per blob, and those of a column
// shard's tensor: at the commit the answer named, else at every head its
// revision had in the window.
func (l *ledger) touched(o *op, r *result, end time.Time) (all, sparse map[*blobFix][][2]int64) {
	var ids []string
	switch named := r.header.Get("X-Repo-Commit"); {
	case hub.IsCommit(o.rev):
		ids = []string{o.rev}
	case named != "" && l.w.commit(named) != nil:
		ids = []string{named}
	case l.hist != nil:
		ids = l.hist.heads(o.repo, r.sent.Add(-revisionTTL-lateness), end)
	default:
		ids = l.w.commitsOf(o.repo)
	}
	all, sparse = map[*blobFix][][2]int64{}, map[*blobFix][][2]int64{}
	for _, id := range ids {
		c := l.w.commit(id)
		if c == nil || c.repo != o.repo {
			continue
		}
		for b, spans := range opSpans(o, c) {
			all[b] = append(all[b], spans...)
		}
		if t := c.tensors[o.tensor]; o.sparse > 0 && t != nil {
			if b := c.files[t.file]; b != nil {
				sparse[b] = append(sparse[b], [2]int64{t.off, t.off + t.n})
			}
		}
	}
	return all, sparse
}

// opSpans is the byte spans of c's blobs that op asks hubproxy to read.
func opSpans(o *op, c *commitFix) map[*blobFix][][2]int64 {
	out := map[*blobFix][][2]int64{}
	file := func(p string, a, b int64) {
		if f := c.files[p]; f != nil && b > a {
			out[f] = append(out[f], [2]int64{a, b})
		}
	}
	whole := func(p string) {
		if f := c.files[p]; f != nil {
			file(p, 0, f.size())
		}
	}
	tensor := func(t *tensorFix) {
		file(t.file, 0, c.headerEnd[t.file])
		file(t.file, t.off, t.off+t.n)
	}
	index := func() {
		for _, p := range indexOf(c) {
			whole(p)
		}
	}
	switch o.kind {
	case opWhole:
		whole(o.path)
	case opRange:
		if f := c.files[o.path]; f != nil {
			if a, b, ok := o.span(f.size()); ok {
				file(o.path, a, b+1)
			}
		}
	case opTensor, opShard:
		if t := c.tensors[o.tensor]; t != nil {
			tensor(t)
		}
		index()
	case opSubset:
		for _, n := range subsetNames(o, c) {
			tensor(c.tensors[n])
		}
		index()
	case opListing:
		for _, p := range stFiles(c) {
			file(p, 0, c.headerEnd[p])
		}
		index()
	}
	return out
}
