// Package floor is the benchmark's yardstick for per-request cost: an HTTP
// server written with net/http that answers "Range: bytes=a-b" of one file
// and does nothing else. It serves the same blob with the same response
// headers as the hubproxy it is compared with, and uses the same strategy
// (one pread for small bodies, sendfile on a descriptor of its own for large
// ones), so what hubproxy costs above it is hubproxy's own work (routing,
// resolving, access, cache lookup, metrics, logs) and what it costs below
// nginx is what any net/http server costs on the machine.
package floor

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
)

// sendfileMin matches hubproxy's: bodies from this size go by sendfile.
const sendfileMin = 128 << 10

// Server answers single byte ranges of one file.
type Server struct {
	path   string
	f      *os.File
	size   int64
	header http.Header
	bufs   sync.Pool
}

// Open opens path and answers every request with its bytes and with header
// (its values copied onto each answer; Content-Length and Content-Range are
// the server's own).
func Open(path string, header http.Header) (*Server, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &Server{path: path, f: f, size: fi.Size(), header: header.Clone()}
	s.bufs.New = func() any { b := make([]byte, sendfileMin); return &b }
	return s, nil
}

// Close closes the file.
func (s *Server) Close() error { return s.f.Close() }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start, end, ok := parseRange(r.Header.Get("Range"), s.size)
	if !ok {
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(s.size, 10))
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		return
	}
	h := w.Header()
	for k, vs := range s.header {
		h[k] = vs
	}
	n := end - start
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end-1, s.size))
	if n < sendfileMin {
		bp := s.bufs.Get().(*[]byte)
		defer s.bufs.Put(bp)
		b := (*bp)[:n]
		if _, err := s.f.ReadAt(b, start); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(b)
		return
	}
	f, err := os.Open(s.path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusPartialContent)
	_, _ = io.Copy(w, io.LimitReader(f, n)) // sendfile via the conn's ReadFrom
}

// parseRange reads "bytes=a-b" (one range, both ends given, as the
// benchmark sends) into [start, end).
func parseRange(v string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(v, "bytes=")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(spec, "-")
	if !found {
		return 0, 0, false
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || first < 0 || last < first || first >= size {
		return 0, 0, false
	}
	return first, min(last+1, size), true
}
