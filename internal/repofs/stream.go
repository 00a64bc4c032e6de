package repofs

import (
	"errors"
	"io"

	"github.com/hubproxy/hubproxy/internal/cache"
)

// stream is one upstream body the File reads sequentially once it bypasses
// the cache. It asks for everything up to end at once and reopens only when
// the reader jumps. It keeps the bytes of the last read, so a reader that
// re-reads them (http.ServeContent re-reads the byte the server probed
// before sending its status line) costs no second request.
type stream struct {
	body    io.ReadCloser   // nil when no request is open
	tally   cache.BodyTally // counts body's bytes in the request's tally
	pos     int64           // file offset body is at
	end     int64           // the reader's window end: requests run to here
	last    []byte          // bytes of the last read, at lastOff
	lastOff int64
}

func (s *stream) close() error {
	if s.body == nil {
		return nil
	}
	err := s.body.Close()
	s.body = nil
	return err
}

// readUpstream reads len(p) bytes at off from upstream, or through the
// shared store when the File reads around its cache (fewer at the end of
// the file, with io.EOF), counting them in the request's tally.
func (f *File) readUpstream(p []byte, off int64) (int, error) {
	size := f.Meta.Size
	if off >= size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	var eof error
	if rest := size - off; int64(len(p)) > rest {
		p, eof = p[:rest], io.EOF
	}
	s := &f.stream
	n := 0
	if off >= s.lastOff && off < s.lastOff+int64(len(s.last)) && off < s.pos {
		n = copy(p, s.last[off-s.lastOff:])
	}
	if n < len(p) {
		m, err := f.readStream(p[n:], off+int64(n))
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, eof
}

// readStream reads exactly len(p) bytes at off from the open stream, opening
// [off, end) first when none is open at off.
func (f *File) readStream(p []byte, off int64) (int, error) {
	s := &f.stream
	if s.body != nil && s.pos != off {
		s.close()
	}
	if s.body == nil {
		end := min(max(s.end, off+int64(len(p))), f.Meta.Size)
		src := f.around
		if src == nil {
			src = f.origin
		}
		body, err := src.FetchRange(f.ctx, off, end-off)
		if err != nil {
			return 0, err
		}
		s.body, s.pos = body, off
		s.tally = cache.TallyFrom(f.ctx).For(body) // upstream's, or the store's through around
	}
	n, err := io.ReadFull(s.body, p)
	s.pos += int64(n)
	s.tally.Add(int64(n))
	s.last, s.lastOff = append(s.last[:0], p[:n]...), off
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		// The stream ended where the window does; a later read reopens.
		s.close()
		if n == len(p) {
			err = nil
		}
	}
	return n, err
}
