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

// Every chunk is read from the store whole and unsealed (seal.go) before
// any byte of it is handed on. The cache verifies a file's content hash
// only once the whole file is present, but it hands out the bytes of a
// partial file to range readers as they arrive: without a check per chunk,
// an object changed in the store (by a tool or a node writing garbage, a
// torn or rotted copy, or anyone who can write the bucket) would reach
// range, tensor and shard readers on every node, for as long as nobody
// happened to read the whole file. With it, a chunk is served only as a
// holder of the cluster's secret put it, and a wrong object is deleted and
// fetched anew at once. (Bytes a node got wrong from upstream itself are
// sealed like any others; those are caught by the file's hash, as before.)

var (
	// errWrongSize: the object is not the size a chunk's object must be.
	errWrongSize = errors.New("sharedfill: chunk object has the wrong size")
	// errUnreadable: the store answers for the object (it exists, at its
	// size) but twice failed to return its bytes, as MinIO does for an
	// object whose checksums no longer match what is on its disks.
	errUnreadable = errors.New("sharedfill: the store keeps failing to return an object it says it has")
)

// Why chunk objects are rejected, for metrics (Options.OnReject).
const (
	RejectMAC         = "mac"          // the tag is wrong: forged, copied from another chunk, or corrupt
	RejectOtherSecret = "other_secret" // sealed under a secret other than this node's
	RejectSize        = "size"         // not the size the chunk's object must be
	RejectUnreadable  = "unreadable"   // the store keeps failing to return it
)

// readChunk reads the object of chunk id whole and returns the chunk's size
// bytes. A chunk not in the store is sharedstore.ErrNotFound, and so is one
// whose object is wrong (the wrong size, a tag that fails under this node's
// secret, or an object the store cannot return), which is deleted so that
// the chunk is claimed, fetched and put anew. Any other error is the store
// failing.
func (o *Origin) readChunk(ctx context.Context, id chunkID, size int64) ([]byte, error) {
	s := o.s
	key := s.chunkKey(id)
	obj, err := s.readObject(ctx, key, size+trailerLen)
	var (
		v     verdict
		other string
	)
	if err == nil {
		var data []byte
		if data, v, other = s.seal.unseal(id, s.opts.ChunkSize, size, obj); v == sealOK {
			return data, nil
		}
	}
	// The messages are the ones earlier layouts logged, which the soak's
	// ledger knows (soak/storelog.go); reason says which seal failed.
	var msg, reason string
	switch {
	case err == nil && v == sealOtherSecret:
		msg, reason = "shared store: chunk object does not match its digest; deleting it", RejectOtherSecret
		s.warnOtherSecret(other)
	case err == nil && v == sealBadSize:
		msg, reason = "shared store: chunk object has the wrong size; deleting it", RejectSize
	case err == nil:
		msg, reason = "shared store: chunk object does not match its digest; deleting it", RejectMAC
	case errors.Is(err, errWrongSize):
		msg, reason = "shared store: chunk object has the wrong size; deleting it", RejectSize
	case errors.Is(err, errUnreadable):
		msg, reason = "shared store: chunk object cannot be read back; deleting it", RejectUnreadable
	default:
		return nil, err
	}
	s.opts.OnReject(reason)
	s.log.Warn(msg, "key", key, "reason", reason, "err", err)
	dctx, cancel := s.opCtx(context.WithoutCancel(ctx))
	s.observe(dctx, s.objs.Delete(dctx, key))
	cancel()
	return nil, sharedstore.ErrNotFound
}

// warnOtherSecret says, once, what a chunk sealed under another secret
// most likely means, since it is otherwise a flood of "forged" chunks: this
// node's secret is not the one the other nodes have.
func (s *Sharer) warnOtherSecret(theirs string) {
	if s.otherSecretSeen.CompareAndSwap(false, true) {
		s.log.Warn("shared store: chunks in the store are sealed under a different secret than this node's; "+
			"unless someone forged them, this node's shared-store-secret differs from the other nodes': "+
			"it rejects and deletes every chunk they put, and they reject its chunks. Give every node the same secret",
			"their_secret_id", theirs, "our_secret_id", s.seal.idString())
	}
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
