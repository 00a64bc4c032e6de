package sharedfill

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// A chunk object is the chunk's bytes followed by their sha256, as the node
// that fetched them from upstream computed it. The cache verifies a file's
// content hash only once the whole file is present, but it hands out the
// bytes of a partial file to range readers as they arrive: without a check
// per chunk, an object changed in the store (a tool or a node writing
// garbage, a torn or rotted copy) would reach range, tensor and shard readers
// on every node, for as long as nobody happened to read the whole file. With
// it, a chunk is served only as it left upstream, and a wrong object is
// deleted and fetched anew at once. (Bytes a node got wrong from upstream
// itself still carry a matching digest; those are caught by the file's hash,
// as before.)
const digestLen = sha256.Size

// seal appends the digest of buf to it: the object to put for a chunk.
// Callers allocate buf with room for it, so this does not copy the chunk.
func seal(buf []byte) []byte {
	sum := sha256.Sum256(buf)
	return append(buf, sum[:]...)
}

// unseal returns the chunk an object of a chunk of size bytes holds, or
// false if the object is not that chunk as its fetcher put it.
func unseal(obj []byte, size int64) ([]byte, bool) {
	if int64(len(obj)) != size+digestLen {
		return nil, false
	}
	data, sum := obj[:size], obj[size:]
	want := sha256.Sum256(data)
	return data, bytes.Equal(sum, want[:])
}

var (
	// errWrongSize: the object is not the size a chunk's object must be.
	errWrongSize = errors.New("sharedfill: chunk object has the wrong size")
	// errUnreadable: the store answers for the object (it exists, at its
	// size) but twice failed to return its bytes, as MinIO does for an
	// object whose checksums no longer match what is on its disks.
	errUnreadable = errors.New("sharedfill: the store keeps failing to return an object it says it has")
)

// readChunk reads the object of chunk id whole and returns the chunk's size
// bytes. A chunk not in the store is sharedstore.ErrNotFound, and so is one
// whose object is wrong (the wrong size, bytes that do not match its digest,
// or an object the store cannot return), which is deleted so that the chunk
// is claimed, fetched and put anew. Any other error is the store failing.
func (o *Origin) readChunk(ctx context.Context, id chunkID, size int64) ([]byte, error) {
	key := o.s.chunkKey(id)
	obj, err := o.s.readObject(ctx, key, size+digestLen)
	if err == nil {
		if data, ok := unseal(obj, size); ok {
			return data, nil
		}
	}
	var msg string
	switch {
	case err == nil:
		msg = "shared store: chunk object does not match its digest; deleting it"
	case errors.Is(err, errWrongSize):
		msg = "shared store: chunk object has the wrong size; deleting it"
	case errors.Is(err, errUnreadable):
		msg = "shared store: chunk object cannot be read back; deleting it"
	default:
		return nil, err
	}
	o.s.log.Warn(msg, "key", key, "err", err)
	dctx, cancel := o.s.opCtx(context.WithoutCancel(ctx))
	o.s.observe(dctx, o.s.objs.Delete(dctx, key))
	cancel()
	return nil, sharedstore.ErrNotFound
}

// readObject reads key whole, expecting want bytes, within OpTimeout for
// the answer and StallTimeout for each part of the body, and records the
// outcome in the breaker. A read that fails while the store still answers
// for the object is tried once more; failing again, it is errUnreadable,
// which the breaker does not count: the object is at fault, not the store.
func (s *Sharer) readObject(ctx context.Context, key string, want int64) ([]byte, error) {
	obj, slow, err := s.getObject(ctx, key, want)
	switch {
	case err == nil, errors.Is(err, sharedstore.ErrNotFound), errors.Is(err, errWrongSize):
		s.observe(ctx, nil) // answers
		return obj, err
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case slow:
		s.observe(ctx, errStoreSlow)
		return nil, errStoreSlow
	}
	var o sharedstore.Object
	serr := s.call(ctx, func(ctx context.Context) (err error) {
		o, err = s.objs.Stat(ctx, key)
		return err
	})
	switch {
	case errors.Is(serr, sharedstore.ErrNotFound):
		return nil, serr // deleted meanwhile
	case serr != nil:
		return nil, err // the store is failing: the stat told the breaker
	case o.Size != want:
		return nil, errWrongSize
	}
	obj, slow, err2 := s.getObject(ctx, key, want)
	switch {
	case err2 == nil, errors.Is(err2, sharedstore.ErrNotFound), errors.Is(err2, errWrongSize):
		s.observe(ctx, nil)
		return obj, err2
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case slow:
		s.observe(ctx, errStoreSlow)
		return nil, errStoreSlow
	}
	return nil, fmt.Errorf("%w: %v; then %v", errUnreadable, err, err2)
}

// getObject is one attempt at reading key whole; slow reports that it failed
// for taking too long.
func (s *Sharer) getObject(ctx context.Context, key string, want int64) (_ []byte, slow bool, _ error) {
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	timer := time.AfterFunc(s.opts.OpTimeout, func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	body, size, err := s.objs.ReadRange(octx, key, 0, -1)
	if err != nil {
		return nil, timedOut.Load(), err
	}
	defer body.Close()
	if size != want {
		return nil, false, errWrongSize
	}
	buf := make([]byte, want)
	var have int64
	for have < want {
		timer.Reset(s.opts.StallTimeout)
		n, err := body.Read(buf[have:])
		have += int64(n)
		if err != nil && have < want {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, timedOut.Load(), err
		}
	}
	return buf, false, nil
}
