package server

import (
	"context"
	"errors"
	"io"

	"github.com/hubproxy/hubproxy/internal/cache"
)

// bypassReader reads a file through the cache and, when the cache cannot
// store what it fetches (a full disk, a quota, an I/O error), carries on
// straight from upstream for the rest of the request: the client is served,
// the error is logged and counted once, and nothing already cached is touched.
// Bytes from upstream are checked by the upstream client as any fill's are.
//
// It is used by one request at a time (http.ServeContent reads sequentially).
type bypassReader struct {
	ctx    context.Context
	h      io.ReaderAt
	origin cache.Origin
	end    int64 // end of the window the request reads; the stream stops there
	onFail func(error)

	body io.ReadCloser // the upstream stream once bypassing; nil before
	pos  int64         // file offset body is at
}

func (b *bypassReader) ReadAt(p []byte, off int64) (int, error) {
	if b.body == nil {
		n, err := b.h.ReadAt(p, off)
		var se *cache.StorageError
		if err == nil || !errors.As(err, &se) {
			return n, err
		}
		b.onFail(err)
		m, err := b.readUpstream(p[n:], off+int64(n))
		return n + m, err
	}
	return b.readUpstream(p, off)
}

// readUpstream reads from one upstream stream of [off, end), reopening it
// only when the reader jumps.
func (b *bypassReader) readUpstream(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.body != nil && b.pos != off {
		b.body.Close()
		b.body = nil
	}
	end := max(b.end, off+int64(len(p)))
	if b.body == nil {
		body, err := b.origin.FetchRange(b.ctx, off, end-off)
		if err != nil {
			return 0, err
		}
		b.body, b.pos = body, off
	}
	n, err := io.ReadFull(b.body, p)
	b.pos += int64(n)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		// The stream ended where the window does; a later read reopens.
		b.body.Close()
		b.body = nil
		if n == len(p) {
			err = nil
		}
	}
	return n, err
}

// Close releases the upstream stream, if any.
func (b *bypassReader) Close() error {
	if b.body != nil {
		return b.body.Close()
	}
	return nil
}
