package sharedfill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

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
		return f.reader(ctx, a-start, b-start), nil
	}
	if !o.s.usable() {
		return o.up.FetchRange(ctx, a, b-a)
	}
	body, err := o.readStored(ctx, id, size, a-start, b-start)
	switch {
	case err == nil:
		return body, nil
	case !errors.Is(err, sharedstore.ErrNotFound):
		if ctx.Err() != nil {
			return nil, err
		}
		return o.up.FetchRange(ctx, a, b-a) // the store is failing: observed, now go around it
	}
	f := o.s.startFlight(id, o, start, size)
	if f == nil {
		return o.up.FetchRange(ctx, a, b-a) // at MaxFlights: not shared, but served
	}
	return f.reader(ctx, a-start, b-start), nil
}

// errStoreSlow is the store failing by taking too long.
var errStoreSlow = errors.New("sharedfill: shared store too slow")

// readStored opens [from, to) of a stored chunk of the given size. A chunk
// that is not there, or whose object has the wrong size (torn or tampered:
// it is deleted), is sharedstore.ErrNotFound. Once open, a failure of the
// store part-way through the body continues from upstream.
func (o *Origin) readStored(ctx context.Context, id chunkID, size, from, to int64) (io.ReadCloser, error) {
	key := o.s.chunkKey(id)
	octx, cancel := context.WithCancel(ctx)
	var slow atomic.Bool
	timer := time.AfterFunc(o.s.opts.OpTimeout, func() { slow.Store(true); cancel() })
	body, got, err := o.s.objs.ReadRange(octx, key, from, to-from)
	if errors.Is(err, sharedstore.ErrShort) {
		body, got, err = nil, -1, nil // torn: handled below, as a wrong size
	}
	if !timer.Stop() || err != nil {
		if body != nil {
			body.Close()
		}
		if err == nil {
			err = octx.Err()
		}
		cancel()
		if slow.Load() {
			err = errStoreSlow
		}
		o.s.observe(ctx, err)
		return nil, err
	}
	o.s.observe(ctx, nil)
	if got != size {
		if body != nil {
			body.Close()
		}
		cancel()
		o.s.log.Warn("shared store: chunk object has the wrong size; deleting it", "key", key, "size", got, "want", size)
		dctx, dcancel := o.s.opCtx(context.WithoutCancel(ctx))
		o.s.observe(dctx, o.s.objs.Delete(dctx, key))
		dcancel()
		return nil, sharedstore.ErrNotFound
	}
	sb := &storeBody{o: o, ctx: ctx, body: body, cancel: cancel, pos: id.index*o.s.opts.ChunkSize + from}
	sb.end = sb.pos + (to - from)
	sb.stall = time.AfterFunc(o.s.opts.StallTimeout, func() { sb.stalled.Store(true); cancel() })
	return sb, nil
}

// storeBody is a stored chunk's bytes [pos, end) of the file that turns to
// upstream for the rest when the store fails part-way: a reset, a stall
// (StallTimeout without a byte), or a body that ends short.
type storeBody struct {
	o        *Origin
	ctx      context.Context // the reader's
	body     io.ReadCloser
	cancel   context.CancelFunc // the store request's
	stall    *time.Timer
	stalled  atomic.Bool
	pos, end int64
	up       io.ReadCloser // after a failure: upstream for [pos, end)
}

func (b *storeBody) Read(p []byte) (int, error) {
	if b.pos >= b.end {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), b.end-b.pos)]
	if b.up != nil {
		n, err := b.up.Read(p)
		b.pos += int64(n)
		return n, err
	}
	n, err := b.body.Read(p)
	b.pos += int64(n)
	if n > 0 {
		b.stall.Reset(b.o.s.opts.StallTimeout)
	}
	if err == nil || b.pos == b.end {
		if b.pos == b.end {
			b.release()
		}
		return n, nil
	}
	if b.ctx.Err() != nil {
		return n, b.ctx.Err()
	}
	// The store failed; the reader did not. Carry on from upstream.
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if b.stalled.Load() {
		err = errStoreSlow
	}
	b.o.s.observe(b.ctx, err)
	b.o.s.log.Warn("shared store read failed part-way; finishing from upstream", "etag", b.o.etag, "at", b.pos, "err", err)
	b.release()
	up, uerr := b.o.up.FetchRange(b.ctx, b.pos, b.end-b.pos)
	if uerr != nil {
		return n, uerr
	}
	b.up = up
	return n, nil
}

// release ends the store request.
func (b *storeBody) release() {
	if b.body != nil {
		b.stall.Stop()
		b.body.Close()
		b.cancel()
		b.body = nil
	}
}

func (b *storeBody) Close() error {
	b.release()
	if b.up != nil {
		return b.up.Close()
	}
	return nil
}
