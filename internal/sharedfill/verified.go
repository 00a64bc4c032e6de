package sharedfill

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Chunks are read from the store whole and unsealed before any byte is
// handed on (chunkobj.go), but the cache fills a file in requests of its
// own size and alignment, and several readers may want one chunk at once.
// Without a memory of what was read, 64 sequential 64 KiB fills within one
// chunk read that chunk from the store 64 times, and a fill straddling two
// chunks read each of them twice (the review measured 120 GETs for a
// 64-chunk file, and 128× the bytes served for small reads). So a node
// keeps the chunks it last verified, or fetched itself, in a small LRU
// bounded by their bytes (Options.VerifiedChunkBytes), and reads each
// chunk from the store once however many readers want it at once
// (internal/flight).
//
// What it holds is exactly what readers would otherwise get: chunks whose
// seal checked out under this node's secret, or that this node fetched
// from upstream itself (the flight's buffer, which readers already
// follow). A chunk that fails its seal is never added. When the cache
// finds a file's hash wrong, Forget and Discard drop the file's chunks from
// it before they touch the store, and a read that was under way when they
// did adds nothing (epoch), so a chunk dropped as possibly wrong is never
// served from memory afterwards.

// Results of a look-up of a chunk the cache wants, for metrics
// (Options.OnVerified).
const (
	VerifiedHit    = "hit"    // served from memory: no store read
	VerifiedJoined = "joined" // shared a store read another reader had started
	VerifiedMiss   = "miss"   // read from the store
)

// verifiedKey names a chunk in memory. The Sharer's chunk size is the same
// for all its chunks; the length tells a file's short last chunk apart
// should two origins ever disagree on the file's size.
type verifiedKey struct {
	id   chunkID
	size int64
}

// verified is the byte-bounded LRU of chunks. A nil *verified holds
// nothing (VerifiedChunkBytes < 0).
type verified struct {
	max int64

	mu    sync.Mutex
	lru   *simplelru.LRU[verifiedKey, []byte] // guarded by mu
	bytes int64                               // sum of the held chunks' lengths; guarded by mu
	epoch uint64                              // counts drops: a read that spans one adds nothing; guarded by mu
}

func newVerified(max int64) *verified {
	if max <= 0 {
		return nil
	}
	v := &verified{max: max}
	// Bounded by bytes, not entries: the count bound is never reached.
	v.lru, _ = simplelru.NewLRU(math.MaxInt, func(_ verifiedKey, data []byte) { v.bytes -= int64(len(data)) })
	return v
}

// get returns the chunk if held, marking it recently used.
func (v *verified) get(k verifiedKey) ([]byte, bool) {
	if v == nil {
		return nil, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lru.Get(k)
}

// now is the epoch to pass to add for a read starting now.
func (v *verified) now() uint64 {
	if v == nil {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.epoch
}

// add keeps data as chunk k, evicting the least recently used chunks to
// stay within max, unless a drop happened since epoch (the read that got
// data may have got what the drop was for). data must never change after.
func (v *verified) add(k verifiedKey, data []byte, epoch uint64) {
	if v == nil || int64(len(data)) > v.max {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.epoch != epoch {
		return
	}
	v.lru.Remove(k) // Add would replace it without the eviction callback
	v.lru.Add(k, data)
	v.bytes += int64(len(data))
	for v.bytes > v.max {
		v.lru.RemoveOldest()
	}
}

// drop forgets every chunk of the file etag, and makes reads under way
// add nothing.
func (v *verified) drop(etag string) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.epoch++
	for _, k := range v.lru.Keys() {
		if k.id.etag == etag {
			v.lru.Remove(k)
		}
	}
}

// held is the bytes held now (tests check the bound with it).
func (v *verified) held() int64 {
	if v == nil {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.bytes
}

// errStoreSkipped: the breaker let no read go to the store just now.
var errStoreSkipped = errors.New("sharedfill: the store is not being tried now")

// storedChunk returns chunk id, of size bytes, as verified: from memory,
// or read from the store once for all who want it at once (readChunk's
// errors: sharedstore.ErrNotFound for a chunk absent or rejected, any
// other for the store failing). When gate is set, a read that has to go to
// the store asks it first (tryStore) and is errStoreSkipped if refused, as
// is one after Close;
// readers that joined a read in progress share its outcome. A reader whose
// ctx ends gets ctx's error; the read goes on for the others, and stops
// once no reader is left.
func (o *Origin) storedChunk(ctx context.Context, id chunkID, size int64, gate func() bool) ([]byte, error) {
	s := o.s
	k := verifiedKey{id: id, size: size}
	if data, ok := s.verified.get(k); ok {
		s.opts.OnVerified(VerifiedHit)
		return data, nil
	}
	var started atomic.Bool // this caller's fn ran: it read the store
	data, err := s.reads.Do(ctx, s.readKey(k), s.opts.FetchTimeout, func(fctx context.Context) ([]byte, error) {
		started.Store(true)
		// Close stops reads too and waits for them, as for flights.
		s.mu.Lock()
		closed := s.ctx.Err() != nil
		if !closed {
			s.wg.Add(1)
		}
		s.mu.Unlock()
		if closed {
			return nil, errStoreSkipped
		}
		defer s.wg.Done()
		if gate != nil && !gate() {
			return nil, errStoreSkipped
		}
		fctx, cancel := context.WithCancel(fctx)
		defer cancel()
		defer context.AfterFunc(s.ctx, cancel)()
		epoch := s.verified.now()
		data, err := o.readChunk(fctx, id, size)
		if err == nil {
			s.verified.add(k, data, epoch)
		}
		return data, err
	})
	switch {
	case errors.Is(err, errStoreSkipped):
	case started.Load():
		s.opts.OnVerified(VerifiedMiss)
	default:
		s.opts.OnVerified(VerifiedJoined)
	}
	return data, err
}

// readKey names the store read of chunk k among the reads in progress.
func (s *Sharer) readKey(k verifiedKey) string {
	return s.chunkKey(k.id) + "/" + strconv.FormatInt(k.size, 10)
}
