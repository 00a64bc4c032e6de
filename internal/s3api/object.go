package s3api

import (
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/repofs"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// serveObject answers HeadObject and GetObject: the file the key names,
// read through repofs exactly as the hub's /resolve/ route reads it.
func (h *Handler) serveObject(w http.ResponseWriter, req *request, bucket, key string) error {
	t, err := ParseBucket(bucket)
	if err != nil {
		return err
	}
	loc, err := ParseKey(t, key)
	if err != nil {
		return err
	}
	if err := h.admit(loc.Repo); err != nil {
		return err
	}
	r := req.r
	ref := hub.FileRef{Repo: loc.Repo, Rev: loc.Revision, Path: loc.Path}
	if r.Method == http.MethodHead {
		// HEAD answers from metadata alone and never waits for a fill.
		m, err := h.opts.Files.Stat(r.Context(), req.caller, ref)
		if err != nil {
			return err
		}
		start, end, partial, err := objectRange(req, m.Size)
		if err != nil {
			return err
		}
		if done := h.objectHeaders(w, req, ref, m, start, end, partial); done {
			return nil
		}
		w.WriteHeader(status(partial))
		return nil
	}
	f, err := h.opts.Files.Open(r.Context(), req.caller, ref)
	if err != nil {
		return err
	}
	defer f.Close()
	m := f.Meta
	start, end, partial, err := objectRange(req, m.Size)
	if err != nil {
		return err
	}
	if done := h.objectHeaders(w, req, ref, m, start, end, partial); done {
		return nil
	}
	if !f.Complete() {
		// The first byte before the status line, so that a Hub failing
		// outright is an S3 error rather than a broken body; the fills ahead
		// cover [start, end) and no more, so a cold ranged GET costs about
		// its bytes upstream.
		if err := f.Begin(start, end, !partial); err != nil {
			return err
		}
	}
	return h.sendBody(w, r, f, start, end, partial)
}

// objectHeaders sets an object's headers, shared by HEAD and GET, and
// answers the conditional requests (done: 304, or a 412 error written).
func (h *Handler) objectHeaders(w http.ResponseWriter, req *request, ref hub.FileRef, m resolver.Meta, start, end int64, partial bool) (done bool) {
	hd := w.Header()
	etag := `"` + m.ETag + `"`
	hd.Set("ETag", etag)
	modified, err := h.commitDate(req, ref.Repo, m.Commit)
	if err == nil {
		hd.Set("Last-Modified", modified.Format(http.TimeFormat))
	} else {
		// Without the commit's date, no Last-Modified at all rather than
		// one that disagrees with the listing's.
		h.log.Debug("S3 object without Last-Modified", "id", req.id, "err", err)
	}
	hd.Set("Accept-Ranges", "bytes")
	hd.Set("X-Repo-Commit", m.Commit)
	switch cond := preconditions(req.r.Header, m.ETag, modified); cond {
	case http.StatusNotModified:
		hd.Del("Content-Type")
		w.WriteHeader(http.StatusNotModified)
		return true
	case http.StatusPreconditionFailed:
		WriteError(w, req.r, &Error{Code: "PreconditionFailed", Message: "at least one of the preconditions you specified did not hold"}, req.resource, req.id)
		return true
	}
	ct := mime.TypeByExtension(path.Ext(ref.Path))
	if ct == "" {
		ct = "application/octet-stream"
	}
	hd.Set("Content-Type", ct)
	hd.Set("Content-Length", itoa(end-start))
	if partial {
		hd.Set("Content-Range", "bytes "+itoa(start)+"-"+itoa(end-1)+"/"+itoa(m.Size))
	}
	return false
}

// commitDate is an object's LastModified: its commit's date, from the
// repo's info at that commit as the listing has it. A commit's date never
// changes, and it is asked for only once the caller has been let read the
// object, so it is kept for every caller: the ranged GETs of one shard
// then cost no API lookup each.
func (h *Handler) commitDate(req *request, repo hub.Repo, commit string) (time.Time, error) {
	key := repo.String() + "@" + commit
	if t, ok := h.dates.get(key); ok {
		return t, nil
	}
	at, err := h.revisionOf(req.r.Context(), req.caller, repo, commit)
	if err != nil {
		return time.Time{}, err
	}
	t := lastModified(at.date)
	h.dates.put(key, t)
	return t, nil
}

// commitDates holds commit dates, a bounded number: past maxDates it starts
// over, which costs one lookup per commit again, never a wrong date.
type commitDates struct {
	mu sync.Mutex
	m  map[string]time.Time
}

const maxDates = 4096

func (d *commitDates) get(key string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.m[key]
	return t, ok
}

func (d *commitDates) put(key string, t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil || len(d.m) >= maxDates {
		d.m = make(map[string]time.Time)
	}
	d.m[key] = t
}

// sendBody writes [start, end) of f: a verified blob by sendfile, else
// through the File's lazy, verified reads. A read that fails part-way
// aborts the response, so no client takes a short body for the object.
func (h *Handler) sendBody(w http.ResponseWriter, r *http.Request, f *repofs.File, start, end int64, partial bool) error {
	if f.Complete() {
		if blob, err := f.Blob(); err == nil {
			defer blob.Close()
			if _, err := blob.Seek(start, io.SeekStart); err == nil {
				w.WriteHeader(status(partial))
				// A LimitedReader of the *os.File: net/http sends it by
				// sendfile, no byte through user space.
				if _, err := io.Copy(w, io.LimitReader(blob, end-start)); err != nil {
					h.abort(r, err)
				}
				return nil
			}
		}
	}
	w.WriteHeader(status(partial))
	if _, err := io.Copy(w, &abortOnError{r: io.NewSectionReader(f, start, end-start), h: h, req: r}); err != nil {
		h.abort(r, err)
	}
	return nil
}

// abort ends a response whose body cannot be completed: the connection is
// cut, which every client reports as a failed transfer.
func (h *Handler) abort(r *http.Request, err error) {
	if r.Context().Err() == nil {
		h.log.Warn("aborting S3 response", "path", r.URL.EscapedPath(), "err", err)
	}
	panic(http.ErrAbortHandler)
}

// abortOnError aborts the response on a read error, before io.Copy could
// end the body short.
type abortOnError struct {
	r   io.Reader
	h   *Handler
	req *http.Request
}

func (a *abortOnError) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && err != io.EOF {
		a.h.abort(a.req, err)
	}
	return n, err
}

func status(partial bool) int {
	if partial {
		return http.StatusPartialContent
	}
	return http.StatusOK
}

// objectRange is the part of an object of size bytes a request asks for:
// its Range, or its partNumber. Every object here is one part (none was
// uploaded in parts), so part 1 is the whole object, answered 206 as S3
// answers it for such an object; SDK transfer managers that download by
// part ask for it first.
func objectRange(req *request, size int64) (start, end int64, partial bool, err error) {
	rng := req.r.Header.Get("Range")
	if !req.query.Has("partNumber") {
		return byteRange(rng, size)
	}
	switch {
	case rng != "":
		return 0, 0, false, &Error{Code: "InvalidRequest", Message: "Range and partNumber cannot be used together"}
	case req.query.Get("partNumber") != "1":
		return 0, 0, false, &Error{Code: "InvalidPartNumber", Message: "the object has one part: partNumber must be 1"}
	case size == 0:
		return 0, 0, false, nil
	}
	return 0, size, true, nil
}

// byteRange reads a Range header as S3 does: one "bytes=" range (first-
// last, first-, or -suffix) is served 206 as [start, end); a header S3
// cannot parse, or one of several ranges, is ignored and the whole object
// served; a range that starts past the end, or any range of an empty
// object, is InvalidRange (416, Content-Range: bytes */size).
func byteRange(h string, size int64) (start, end int64, partial bool, err error) {
	whole := func() (int64, int64, bool, error) { return 0, size, false, nil }
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return whole()
	}
	a, b, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return whole()
	}
	unsatisfiable := &Error{Code: "InvalidRange", Message: "the requested range is not satisfiable", ContentRange: "bytes */" + itoa(size)}
	if a == "" {
		n, perr := strconv.ParseInt(b, 10, 64)
		if perr != nil || n < 0 {
			return whole()
		}
		if n == 0 || size == 0 {
			return 0, 0, false, unsatisfiable
		}
		return max(size-n, 0), size, true, nil
	}
	first, perr := strconv.ParseInt(a, 10, 64)
	if perr != nil || first < 0 {
		return whole()
	}
	last := int64(-1)
	if b != "" {
		if last, perr = strconv.ParseInt(b, 10, 64); perr != nil || last < first {
			return whole()
		}
	}
	if first >= size {
		return 0, 0, false, unsatisfiable
	}
	if last < 0 || last >= size {
		last = size - 1
	}
	return first, last + 1, true, nil
}

// preconditions evaluates the conditional headers as S3 does (RFC 9110
// §13.2.2's order): If-Match, else If-Unmodified-Since, may fail the
// request with 412; then If-None-Match, else If-Modified-Since, may make it
// 304. It returns 0 when the object is to be served. modified zero: the
// date conditions cannot be judged and are ignored.
func preconditions(h http.Header, etag string, modified time.Time) int {
	if im := h.Get("If-Match"); im != "" {
		if !etagListed(im, etag) {
			return http.StatusPreconditionFailed
		}
	} else if ius := h.Get("If-Unmodified-Since"); ius != "" && !modified.IsZero() {
		if t, err := http.ParseTime(ius); err == nil && modified.After(t) {
			return http.StatusPreconditionFailed
		}
	}
	if inm := h.Get("If-None-Match"); inm != "" {
		if etagListed(inm, etag) {
			return http.StatusNotModified
		}
	} else if ims := h.Get("If-Modified-Since"); ims != "" && !modified.IsZero() {
		if t, err := http.ParseTime(ims); err == nil && !modified.After(t) {
			return http.StatusNotModified
		}
	}
	return 0
}

// etagListed reports whether a header's list of entity tags names etag
// ("*" names any), compared without quotes and weakness.
func etagListed(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimSpace(v)
		if v == "*" || v != "" && hub.NormalizeETag(v) == etag {
			return true
		}
	}
	return false
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
