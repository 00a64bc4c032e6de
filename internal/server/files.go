package server

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// serveFiles answers HEAD and GET on /{repo}/resolve|raw/{rev}/{path}.
func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request) {
	fr, err := parseFileRoute(r.URL.EscapedPath())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.writeError(w, r, &methodError{allow: "GET, HEAD"})
		return
	}
	if err := s.opts.Admission.repo(fr.repo); err != nil {
		s.writeError(w, r, err)
		return
	}
	auth := r.Header.Get("Authorization")
	m, err := s.opts.Resolver.File(r.Context(), auth, fr.repo, fr.rev, fr.path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if fr.raw && hub.ETagKind(m.ETag) == hub.HashSHA256 {
		// /raw/ on an LFS file is its pointer, exactly as the hub answers.
		s.servePointer(w, r, m)
		return
	}
	setFileHeaders(w.Header(), fr.path, m)
	if r.Method == http.MethodHead {
		// HEAD answers from metadata alone and never waits for a fill
		// (huggingface_hub gives it 10 s), with the status GET would have.
		if noneMatch(r.Header.Get("If-None-Match"), m.ETag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(m.Size, 10))
		w.WriteHeader(http.StatusOK)
		return
	}
	origin := s.opts.Resolver.Origin(auth, fr.repo, fr.path, m)
	if hub.ETagKind(m.ETag) == hub.HashUnknown {
		s.passThrough(w, r, m, origin)
		return
	}
	h, err := s.opts.Store.Open(r.Context(), cache.File{
		Repo: fr.repo, Commit: m.Commit, Path: fr.path, ETag: m.ETag, Size: m.Size,
	}, origin)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer h.Close()
	if m.Size == 0 && r.Header.Get("Range") != "" {
		// A zero-byte file has no satisfiable range; answer the whole
		// (empty) body rather than 416 so probes like bytes=0-0 succeed,
		// with the total where the JS client's fileDownloadInfo reads it.
		r.Header.Del("Range")
		w.Header().Set("Content-Range", "bytes */0")
	}
	if f, err := h.OpenBlob(); err == nil {
		// Verified and complete: serve the file itself, so net/http can
		// use sendfile and no byte passes through user space.
		defer f.Close()
		if start, end, ok := singleRange(r.Header.Get("Range"), m.Size); ok {
			s.observeCache(r, end-start, end-start)
		} else if r.Header.Get("Range") == "" {
			s.observeCache(r, m.Size, m.Size)
		}
		http.ServeContent(w, r, "", time.Time{}, f)
		return
	}
	windowStart, windowEnd := int64(0), m.Size
	if start, end, ok := singleRange(r.Header.Get("Range"), m.Size); ok {
		h.Expect(start, end)
		windowStart, windowEnd = start, end
		s.observeCache(r, h.Present(start, end), end-start)
	} else if r.Header.Get("Range") == "" {
		h.Expect(0, m.Size)
		s.observeCache(r, h.Present(0, m.Size), m.Size)
	}
	br := &bypassReader{ctx: r.Context(), h: h, origin: origin, end: windowEnd, discard: h.Discard, tally: &info(r).tally, onFail: func(err error) {
		info(r).cache = "bypass"
		s.log.Error("cache cannot store this file; serving it straight from upstream", "path", r.URL.EscapedPath(), "err", err)
		if s.opts.Metrics != nil {
			s.opts.Metrics.CacheBypass.Inc()
		}
	}}
	defer br.Close()
	// Read the first byte before the status line is sent, so that an
	// upstream that fails outright gets a proper error answer rather than
	// an aborted 200. It costs nothing: its block is needed first anyway.
	_, _, satisfiable := singleRange(r.Header.Get("Range"), m.Size)
	if windowEnd > windowStart && (satisfiable || r.Header.Get("Range") == "") {
		var first [1]byte
		if _, err := br.ReadAt(first[:], windowStart); err != nil && err != io.EOF {
			s.writeError(w, r, err)
			return
		}
	}
	if r.Header.Get("Range") == "" {
		br.verifyWhole(m.ETag, m.Size)
	}
	http.ServeContent(w, r, "", time.Time{}, &abortOnError{r: io.NewSectionReader(br, 0, m.Size), s: s, req: r})
}

// noneMatch reports whether an If-None-Match value matches etag, so the
// answer is 304 (RFC 9110 §13.1.2: weak comparison, "*" matches any).
func noneMatch(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimSpace(v)
		if v == "*" || v != "" && hub.NormalizeETag(v) == etag {
			return true
		}
	}
	return false
}

// abortOnError turns a read error part-way through a body into an aborted
// response. http.ServeContent would otherwise end the body early and leave
// keep-alive bookkeeping to chance; aborting makes every client see a failed
// transfer, never a short file that looks complete.
type abortOnError struct {
	r   *io.SectionReader
	s   *Server
	req *http.Request
}

func (a *abortOnError) Seek(off int64, whence int) (int64, error) { return a.r.Seek(off, whence) }

func (a *abortOnError) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && err != io.EOF {
		if a.req.Context().Err() == nil {
			a.s.log.Warn("aborting response", "path", a.req.URL.EscapedPath(), "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	return n, err
}

func setFileHeaders(h http.Header, name string, m resolver.Meta) {
	etag := `"` + m.ETag + `"`
	h.Set("X-Repo-Commit", m.Commit)
	h.Set("ETag", etag)
	h.Set("X-Linked-Etag", etag)
	h.Set("X-Linked-Size", strconv.FormatInt(m.Size, 10))
	h.Set("Accept-Ranges", "bytes")
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	base := path.Base(name)
	h.Set("Content-Disposition", fmt.Sprintf(`inline; filename*=UTF-8''%s; filename="%s"`,
		escapeRFC5987(base), asciiFilename(base)))
}

// servePointer answers /raw/ for an LFS file with its git-lfs pointer,
// which is derived from the sha256 and size alone.
func (s *Server) servePointer(w http.ResponseWriter, r *http.Request, m resolver.Meta) {
	ptr := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", m.ETag, m.Size)
	sum := sha1.Sum([]byte(fmt.Sprintf("blob %d\x00%s", len(ptr), ptr)))
	h := w.Header()
	h.Set("X-Repo-Commit", m.Commit)
	h.Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	http.ServeContent(w, r, "", time.Time{}, strings.NewReader(ptr))
}

// passThrough serves a file whose ETag cannot name a verified blob: the bytes
// are streamed from upstream uncached, honouring a single Range.
func (s *Server) passThrough(w http.ResponseWriter, r *http.Request, m resolver.Meta, o cache.Origin) {
	start, end := int64(0), m.Size
	status := http.StatusOK
	if rh := r.Header.Get("Range"); rh != "" && m.Size > 0 {
		if a, b, ok := singleRange(rh, m.Size); ok {
			start, end, status = a, b, http.StatusPartialContent
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b-1, m.Size))
		} else if rangeStartsPastEnd(rh, m.Size) {
			w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(m.Size, 10))
			http.Error(w, "range not satisfiable", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		// Otherwise (several or malformed ranges) the Range is ignored and
		// the whole file sent, as RFC 9110 §14.2 allows.
	}
	w.Header().Set("Content-Length", strconv.FormatInt(end-start, 10))
	if end == start {
		w.WriteHeader(status)
		return
	}
	body, err := o.FetchRange(r.Context(), start, end-start)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer body.Close()
	w.WriteHeader(status)
	ri := info(r)
	ri.cache = "bypass"
	n, err := io.Copy(w, body)
	ri.tally.Add(n)
	if err != nil && !errors.Is(err, r.Context().Err()) {
		s.log.Warn("pass-through copy failed", "path", r.URL.EscapedPath(), "err", err)
		panic(http.ErrAbortHandler)
	}
}

// rangeStartsPastEnd reports whether a Range's first spec starts at or past
// the end of the file, which is answered 416 (HfFileSystem reads that as EOF).
func rangeStartsPastEnd(h string, size int64) bool {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(spec, ",")
	a, _, _ := strings.Cut(strings.TrimSpace(first), "-")
	n, err := strconv.ParseInt(a, 10, 64)
	return a != "" && err == nil && n >= size
}

// singleRange parses a single-range "bytes=" header (RFC 9110 §14.1.2) into
// the half-open [start, end). ok is false for no header, multiple ranges, or
// an unsatisfiable range; http.ServeContent then produces the right answer.
func singleRange(h string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") || size <= 0 {
		return 0, 0, false
	}
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false
	}
	if a == "" { // suffix: the last b bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size, true
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 || first >= size {
		return 0, 0, false
	}
	if b == "" {
		return first, size, true
	}
	last, err := strconv.ParseInt(b, 10, 64)
	if err != nil || last < first {
		return 0, 0, false
	}
	return first, min(last+1, size), true
}

func escapeRFC5987(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func asciiFilename(s string) string {
	return strings.Map(func(c rune) rune {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return '_'
		}
		return c
	}, s)
}
