package server

import (
	"io"
	"net/http"
	"strconv"
	"sync"
)

// smallBodies holds buffers for serveSmall, each sendfileMin bytes.
type smallBodies struct{ pool sync.Pool }

func (b *smallBodies) get() *[]byte {
	if p, ok := b.pool.Get().(*[]byte); ok {
		return p
	}
	buf := make([]byte, sendfileMin)
	return &buf
}

// serveSmall answers a plain single-range GET of a verified blob, under
// sendfileMin bytes, with one pread into a pooled buffer and one Write.
// http.ServeContent would pread twice (it sniffs the first 512 bytes before
// handing the rest to ReadFrom) and flush the header on its own first; on
// warm 4 KiB ranges that is most of a request's cost. Requests with
// preconditions ServeContent evaluates (If-None-Match, If-Range, If-Match,
// If-Modified-Since, If-Unmodified-Since) take ServeContent's path, as it
// reports false.
// The ETag and content headers are already set.
func (s *Server) serveSmall(w http.ResponseWriter, r *http.Request, f io.ReaderAt, start, end, size int64) bool {
	h := r.Header
	if h.Get("If-None-Match") != "" || h.Get("If-Range") != "" || h.Get("If-Match") != "" || h.Get("If-Modified-Since") != "" || h.Get("If-Unmodified-Since") != "" {
		return false
	}
	p := s.bodies.get()
	defer s.bodies.pool.Put(p)
	body := (*p)[:end-start]
	if n, err := f.ReadAt(body, start); n < len(body) {
		s.writeError(w, r, err)
		return true
	}
	wh := w.Header()
	wh.Set("Content-Range", "bytes "+strconv.FormatInt(start, 10)+"-"+strconv.FormatInt(end-1, 10)+"/"+strconv.FormatInt(size, 10))
	wh.Set("Content-Length", strconv.FormatInt(end-start, 10))
	w.WriteHeader(http.StatusPartialContent)
	w.Write(body)
	return true
}
