package server

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/repofs"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// serveFiles answers HEAD and GET on /{repo}/resolve|raw/{rev}/{path}.
func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request) {
	fr, err := hub.ParseFileURL(r.URL.EscapedPath())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.writeError(w, r, &methodError{allow: "GET, HEAD"})
		return
	}
	if err := s.opts.Admission.repo(fr.Repo); err != nil {
		s.writeError(w, r, err)
		return
	}
	c := callerOf(r)
	if r.Method == http.MethodHead || fr.Raw {
		m, err := s.opts.Files.Stat(r.Context(), c, fr.FileRef)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if fr.Raw && hub.ETagKind(m.ETag) == hub.HashSHA256 {
			// /raw/ on an LFS file is its pointer, exactly as the hub answers.
			s.servePointer(w, r, m)
			return
		}
		if r.Method == http.MethodHead {
			// HEAD answers from metadata alone and never waits for a fill
			// (huggingface_hub gives it 10 s), with the status GET would have.
			setFileHeaders(w.Header(), fr.Path, m)
			if noneMatch(r.Header.Get("If-None-Match"), m.ETag) {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("Content-Length", strconv.FormatInt(m.Size, 10))
			w.WriteHeader(http.StatusOK)
			return
		}
	}
	f, err := s.opts.Files.Open(r.Context(), c, fr.FileRef)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer f.Close()
	s.serveFile(w, r, f)
}

// sendfileMin is the body size from which a verified blob is served with
// sendfile on a descriptor of its own; smaller ranges are one pread of the
// shared descriptor, which costs fewer system calls than opening a file.
const sendfileMin = 128 << 10

// serveFile answers a GET for an opened file: from the verified blob with
// sendfile when it is one, else through the File's lazy, verified reads.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, f *repofs.File) {
	m := f.Meta
	setFileHeaders(w.Header(), f.Path, m)
	// Whether the answer comes from the cache (hit, partial, miss), which
	// `hubproxy pull` reports per file; Present only for a cold file.
	state := "hit"
	if !f.Complete() {
		if state = "miss"; f.Present(0, m.Size) > 0 {
			state = "partial"
		}
	}
	w.Header()["X-Hubproxy-Cache"] = []string{state}
	if !s.limitRanges(w, r, f) {
		return // more ranges than a cold file is served for
	}
	if f.Complete() {
		rng := parseRange(r.Header.Get("Range"), m.Size)
		if rng.whole || rng.single {
			s.observeCache(r, rng.end-rng.start, rng.end-rng.start)
		}
		if rng.single && rng.end-rng.start < sendfileMin {
			// A small range of a verified blob: one pread of the file the
			// cache keeps open, no open, seek or close per request.
			if !s.serveSmall(w, r, f, rng.start, rng.end, m.Size) {
				http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(f, 0, m.Size))
			}
			return
		}
		if blob, err := f.Blob(); err == nil {
			// A large body: serve the file itself, so net/http can use
			// sendfile and no byte passes through user space.
			defer blob.Close()
			http.ServeContent(w, r, "", time.Time{}, blob)
			return
		}
	}
	s.serveContent(w, r, f)
}

// content is what serveContent serves: a repo file (repofs.File) or bytes
// assembled from files (tensor.Assembly).
type content interface {
	io.ReaderAt
	Size() int64
	// Complete reports whether every byte is local: no read waits or goes
	// upstream.
	Complete() bool
	// Present reports how many bytes of [off, end) are local already.
	Present(off, end int64) int64
	// Begin prepares serving [off, end) next (whole: all of it, from 0),
	// reading its first byte so that an upstream failing outright is an
	// error before the status line.
	Begin(off, end int64, whole bool) error
	// Bypassed reports whether reads went around the cache to upstream.
	Bypassed() bool
}

// serveContent answers a GET for c once limitRanges has passed: the status
// line waits for the first byte, and a read that fails part-way aborts the
// answer rather than ending it short.
func (s *Server) serveContent(w http.ResponseWriter, r *http.Request, c content) {
	rng := parseRange(r.Header.Get("Range"), c.Size())
	if rng.whole || rng.single {
		s.observeCache(r, c.Present(rng.start, rng.end), rng.end-rng.start)
		if err := c.Begin(rng.start, rng.end, rng.whole); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	defer func() {
		if c.Bypassed() {
			info(r).cache = "bypass"
		}
	}()
	http.ServeContent(w, r, "", time.Time{}, &abortOnError{r: io.NewSectionReader(c, 0, c.Size()), s: s, req: r})
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
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	base := path.Base(name)
	etag := `"` + m.ETag + `"`
	// Keys are written in canonical form straight into the map, and the
	// values share one backing array: this runs on every warm read, where
	// Header.Set's canonicalisation and seven small allocations showed in
	// profiles of 4 KiB ranges.
	v := [...]string{
		m.Commit, etag, etag, strconv.FormatInt(m.Size, 10), "bytes", ct,
		"inline; filename*=UTF-8''" + escapeRFC5987(base) + `; filename="` + asciiFilename(base) + `"`,
	}
	vs := v[:]
	h["X-Repo-Commit"] = vs[0:1:1]
	h["Etag"] = vs[1:2:2]
	h["X-Linked-Etag"] = vs[2:3:3]
	h["X-Linked-Size"] = vs[3:4:4]
	h["Accept-Ranges"] = vs[4:5:5]
	h["Content-Type"] = vs[5:6:6]
	h["Content-Disposition"] = vs[6:7:7]
}

// servePointer answers /raw/ for an LFS file with its git-lfs pointer,
// which is derived from the sha256 and size alone.
func (s *Server) servePointer(w http.ResponseWriter, r *http.Request, m resolver.Meta) {
	ptr := hub.LFSPointer(m.ETag, m.Size)
	h := w.Header()
	h.Set("X-Repo-Commit", m.Commit)
	h.Set("ETag", `"`+hub.GitBlobSHA1(ptr)+`"`)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(ptr))
}

func escapeRFC5987(s string) string {
	if !strings.ContainsFunc(s, needsRFC5987Escape) {
		return s // the usual file name: nothing to build
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !needsRFC5987Escape(rune(c)) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// needsRFC5987Escape reports whether c (a byte, or a rune of a string being
// scanned) is outside RFC 5987's attr-char.
func needsRFC5987Escape(c rune) bool {
	return !(c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$&+-.^_`|~", c)))
}

func asciiFilename(s string) string {
	unsafe := func(c rune) bool { return c < 0x20 || c > 0x7e || c == '"' || c == '\\' }
	if !strings.ContainsFunc(s, unsafe) {
		return s
	}
	return strings.Map(func(c rune) rune {
		if unsafe(c) {
			return '_'
		}
		return c
	}, s)
}
