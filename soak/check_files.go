package soak

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
)

// rangeHeader renders op's Range: "bytes=a-b", "bytes=a-" (end < 0) or
// "bytes=-n" (start < 0, n = end).
func (op *op) rangeHeader() string {
	switch {
	case op.rng[0] < 0:
		return fmt.Sprintf("bytes=-%d", op.rng[1])
	case op.rng[1] < 0:
		return fmt.Sprintf("bytes=%d-", op.rng[0])
	}
	return fmt.Sprintf("bytes=%d-%d", op.rng[0], op.rng[1])
}

// span is the bytes op's range selects of a file of size bytes; ok is false
// when it selects none (416).
func (op *op) span(size int64) (a, b int64, ok bool) {
	switch {
	case op.rng[0] < 0:
		if op.rng[1] <= 0 || size == 0 {
			return 0, 0, false
		}
		return max(size-op.rng[1], 0), size - 1, true
	case op.rng[0] >= size:
		return 0, 0, false
	case op.rng[1] < 0:
		return op.rng[0], size - 1, true
	}
	return op.rng[0], min(op.rng[1], size-1), true
}

// checkFile judges an allowed answer to a /resolve/ request.
func (o *oracle) checkFile(r *result) judgement {
	op := r.op
	present := func(c *commitFix) bool { return c.files[op.path] != nil }
	if r.status == http.StatusNotFound && r.header.Get("X-Error-Code") == "EntryNotFound" {
		return o.entryNotFound(r, present)
	}
	if op.kind == opMissing {
		return violation("status", "%d for a file no commit has", r.status)
	}
	c, j := o.namedCommit(r, r.header.Get("X-Repo-Commit"))
	if j.out == outViolation {
		return j
	}
	f := c.files[op.path]
	if f == nil {
		return violation("status", "%d for %s at %s, which does not have it", r.status, op.path, c.id)
	}
	switch {
	case op.kind == opRange && r.status == http.StatusRequestedRangeNotSatisfiable:
		if _, _, ok := op.span(f.size()); ok {
			return violation("status", "416 for %s of a %d-byte file", op.rangeHeader(), f.size())
		}
		return j
	case op.kind == opHead && r.status == http.StatusOK:
		return withStale(j, checkHeadHeaders(r, f))
	case op.kind == opWhole && r.status == http.StatusOK:
		if cl := r.header.Get("Content-Length"); cl != strconv.FormatInt(f.size(), 10) {
			return violation("wrong-bytes", "Content-Length %s for a %d-byte file", cl, f.size())
		}
		return withStale(j, o.checkBody(r, f, f.data))
	case op.kind == opRange && r.status == http.StatusPartialContent:
		a, b, ok := op.span(f.size())
		want := fmt.Sprintf("bytes %d-%d/%d", a, b, f.size())
		if !ok || r.header.Get("Content-Range") != want {
			return violation("wrong-bytes", "Content-Range %q for %s, want %q", r.header.Get("Content-Range"), op.rangeHeader(), want)
		}
		return withStale(j, o.checkBody(r, f, f.data[a:b+1]))
	}
	return violation("status", "%d %s for %s", r.status, r.header.Get("X-Error-Code"), op)
}

func withStale(j, k judgement) judgement {
	k.stale = k.stale || j.stale
	return k
}

// checkHeadHeaders judges a HEAD answer's metadata.
func checkHeadHeaders(r *result, f *blobFix) judgement {
	size := strconv.FormatInt(f.size(), 10)
	switch {
	case r.header.Get("Content-Length") != size:
		return violation("wrong-bytes", "HEAD Content-Length %s, want %s", r.header.Get("Content-Length"), size)
	case r.header.Get("X-Linked-Size") != size:
		return violation("wrong-bytes", "HEAD X-Linked-Size %s, want %s", r.header.Get("X-Linked-Size"), size)
	case r.header.Get("ETag") != `"`+f.etag+`"`:
		return violation("wrong-bytes", "HEAD ETag %s, want %q", r.header.Get("ETag"), f.etag)
	}
	return served()
}

// checkBody compares a body with want: whole and equal, or cut short with
// every byte that arrived right. Only the file the CorruptBytes fault hits
// may break off after wrong bytes: hubproxy cannot know a byte is wrong until
// the file's hash is complete, and then it aborts the download instead of
// finishing it.
func (o *oracle) checkBody(r *result, f *blobFix, want []byte) judgement {
	if bodyCut(r) {
		if at := mismatchAt(r.body, want); at >= 0 && f.key != o.w.corruptKey {
			return violation("wrong-bytes", "a body cut short after %d bytes differs from the file at offset %d", len(r.body), at)
		}
		return unavailable("body cut short")
	}
	if len(r.body) != len(want) {
		return violation("wrong-bytes", "a complete body of %d bytes, want %d", len(r.body), len(want))
	}
	if len(want) == int(f.size()) {
		if sha256.Sum256(r.body) != f.sum {
			return violation("wrong-bytes", "a complete download whose sha256 is not the file's (first difference at %d)", mismatchAt(r.body, want))
		}
		return served()
	}
	if at := mismatchAt(r.body, want); at >= 0 {
		return violation("wrong-bytes", "differs from the file at offset %d of the range", at)
	}
	return served()
}
