package sharedfill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// Origin is one file's upstream with its ranges shared through the store.
// It is a cache.Origin.
type Origin struct {
	s    *Sharer
	etag string
	size int64
	up   Upstream
}

// FetchRange returns [off, off+n) of the file: chunk by chunk, each from the
// store, from a fetch of it in flight on this node, or from a claim on it
// (see the package comment). The first chunk's source is opened before it
// returns, so a failure to get any bytes is its error.
func (o *Origin) FetchRange(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 || off+n > o.size {
		return nil, fmt.Errorf("sharedfill: range %d+%d outside the file's %d bytes", off, n, o.size)
	}
	if n == 0 || !o.s.usable() {
		return o.up.FetchRange(ctx, off, n)
	}
	r := &rangeReader{o: o, ctx: ctx, pos: off, end: off + n}
	if err := r.next(); err != nil {
		return nil, err
	}
	return r, nil
}

// chunkBounds is where chunk idx starts and how long it is.
func (o *Origin) chunkBounds(idx int64) (start, size int64) {
	start = idx * o.s.opts.ChunkSize
	return start, min(o.s.opts.ChunkSize, o.size-start)
}

// rangeReader reads a range across chunks, opening each chunk's source when
// the read reaches it.
type rangeReader struct {
	o        *Origin
	ctx      context.Context
	pos, end int64
	cur      io.ReadCloser // source of [pos, curEnd); nil between chunks
	curEnd   int64
	stored   int64 // bytes the store served, of the sources closed so far
}

// StoreBytes is how many of the bytes read so far the store served (a
// cache.FromStore, so the request's tally tells them from upstream's).
func (r *rangeReader) StoreBytes() int64 { return r.stored + storeBytesOf(r.cur) }

// fromStore is a chunk's source that counts the bytes it gave that the
// store served. Every other source is upstream's: a fetch here, or this
// node's flight fetching the chunk.
type fromStore interface{ StoreBytes() int64 }

func storeBytesOf(r io.Reader) int64 {
	if s, ok := r.(fromStore); ok {
		return s.StoreBytes()
	}
	return 0
}

func (r *rangeReader) next() error {
	idx := r.pos / r.o.s.opts.ChunkSize
	start, size := r.o.chunkBounds(idx)
	end := min(start+size, r.end)
	src, err := r.o.source(r.ctx, idx, r.pos, end)
	if err != nil {
		return err
	}
	r.cur, r.curEnd = src, end
	return nil
}

func (r *rangeReader) Read(p []byte) (int, error) {
	for {
		if r.pos >= r.end {
			return 0, io.EOF
		}
		if r.cur == nil {
			if err := r.next(); err != nil {
				return 0, err
			}
		}
		n, err := r.cur.Read(p[:min(int64(len(p)), r.curEnd-r.pos)])
		r.pos += int64(n)
		if r.pos == r.curEnd {
			r.stored += storeBytesOf(r.cur)
			r.cur.Close()
			r.cur = nil
			if n > 0 || len(p) == 0 {
				return n, nil
			}
			continue
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // every source yields exactly its range
		}
		if n > 0 || err != nil || len(p) == 0 {
			return n, err
		}
	}
}

func (r *rangeReader) Close() error {
	if r.cur != nil {
		r.stored += storeBytesOf(r.cur)
		r.cur.Close()
		r.cur = nil
	}
	return nil
}

// source returns the bytes [a, b) of chunk idx (absolute offsets).
func (o *Origin) source(ctx context.Context, idx, a, b int64) (io.ReadCloser, error) {
	id := chunkID{etag: o.etag, index: idx}
	start, size := o.chunkBounds(idx)
	if f := o.s.joinFlight(id); f != nil {
		return f.reader(ctx, o, a-start, b-start), nil
	}
	body, err := o.readStored(ctx, id, size, a-start, b-start, o.s.tryStore)
	switch {
	case err == nil:
		return body, nil
	case errors.Is(err, errStoreSkipped):
		return o.up.FetchRange(ctx, a, b-a) // the store is down and another read probes it
	case !errors.Is(err, sharedstore.ErrNotFound):
		if ctx.Err() != nil {
			return nil, err
		}
		return o.up.FetchRange(ctx, a, b-a) // the store is failing: observed, now go around it
	}
	f := o.s.startFlight(id, o, start, size)
	if f == nil {
		// At MaxFlights: served, not shared; another node may fetch it too.
		o.s.log.Debug("shared store: too many chunks in flight; fetching around the store", "key", o.s.chunkKey(id))
		return o.up.FetchRange(ctx, a, b-a)
	}
	return f.reader(ctx, o, a-start, b-start), nil
}

// errStoreSlow is the store failing by taking too long.
var errStoreSlow = errors.New("sharedfill: shared store too slow")

// readStored returns [from, to) of stored chunk id, of size bytes, read
// whole and unsealed first (chunkobj.go, seal.go) or kept in memory since
// (verified.go): a stored chunk is never handed on unchecked, so the store
// serves whole chunks even for a few bytes of one. A chunk that is not
// there, or not right, is sharedstore.ErrNotFound; gate is storedChunk's.
func (o *Origin) readStored(ctx context.Context, id chunkID, size, from, to int64, gate func() bool) (io.ReadCloser, error) {
	data, err := o.storedChunk(ctx, id, size, gate)
	if err != nil {
		return nil, err
	}
	return storedBody{bytes.NewReader(data[from:to])}, nil
}

// storedBody is bytes of a stored chunk, checked.
type storedBody struct{ *bytes.Reader }

func (b storedBody) StoreBytes() int64 { return b.Size() - int64(b.Len()) }
func (storedBody) Close() error        { return nil }
