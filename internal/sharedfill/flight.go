package sharedfill

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// flight is this node's work on one chunk that was not in the store: the
// claim, then either the wait for another node's copy to land or the fetch
// from upstream (buffered whole, to put it). The node's readers of the chunk
// share it rather than each going to the store. It runs on its own context,
// bounded by FetchTimeout: once it owns a claim, other nodes wait on it, so
// it finishes even when the reader that started it has gone. A flight that
// only waits is cancelled when its last reader leaves.
type flight struct {
	s           *Sharer
	o           *Origin // of the reader that started it: its upstream fetches the chunk
	id          chunkID
	start, size int64 // the chunk's place in the file
	cancel      context.CancelFunc
	users       int         // readers; guarded by s.mu
	owning      atomic.Bool // holds a claim, so others depend on it

	mu     sync.Mutex
	local  bool          // this node fetches the chunk from upstream (or is about to)
	buf    []byte        // the chunk as fetched; [0, have) final
	have   int64         // bytes of buf filled
	landed bool          // in the store now: read it there
	err    error         // the fetch failed
	wake   chan struct{} // closed and replaced whenever the above change
}

// joinFlight returns the flight on id, counting the caller as a reader, or
// nil.
func (s *Sharer) joinFlight(id chunkID) *flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flights[id]
	if f != nil {
		f.users++
	}
	return f
}

// startFlight joins or starts the flight on id; nil at MaxFlights.
func (s *Sharer) startFlight(id chunkID, o *Origin, start, size int64) *flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.flights[id]; f != nil {
		f.users++
		return f
	}
	if len(s.flights) >= s.opts.MaxFlights || s.ctx.Err() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.FetchTimeout)
	f := &flight{s: s, o: o, id: id, start: start, size: size, cancel: cancel, users: 1, wake: make(chan struct{})}
	s.flights[id] = f
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		f.run(ctx)
	}()
	return f
}

// leave counts a reader out; the last one out of a flight that owns nothing
// stops it.
func (s *Sharer) leave(f *flight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.users--
	if f.users == 0 && !f.owning.Load() {
		f.cancel()
		if s.flights[f.id] == f {
			delete(s.flights, f.id)
		}
	}
}

// run obtains the chunk and then takes the flight off the map, so later
// readers go to the store.
func (f *flight) run(ctx context.Context) {
	defer func() {
		f.s.mu.Lock()
		if f.s.flights[f.id] == f {
			delete(f.s.flights, f.id)
		}
		f.s.mu.Unlock()
	}()
	if err := f.obtain(ctx); err != nil {
		f.update(func() { f.err = err })
	}
}

// obtain claims the chunk and acts on the outcome.
func (f *flight) obtain(ctx context.Context) error {
	held, landed, tookOver, err := f.s.acquire(ctx, f)
	switch {
	case err != nil && ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.Is(err, errWaitedTooLong):
		// The store works, but whoever holds the claim is too slow
		// for us: fetch it ourselves, and offer our copy too.
		f.s.log.Warn("shared store: gave up waiting for another node's chunk; fetching it here", "key", f.s.chunkKey(f.id))
		return f.fetch(ctx, nil, true)
	case err != nil:
		return f.fetch(ctx, nil, false) // the store is failing: upstream only
	case landed:
		f.s.opts.OnClaim(ClaimWaited)
		f.update(func() { f.landed = true })
		return nil
	case tookOver:
		f.s.opts.OnClaim(ClaimTakenOver)
	default:
		f.s.opts.OnClaim(ClaimWon)
	}
	return f.fetch(ctx, held, true)
}

// fetch gets the chunk from upstream into the buffer, readers following as
// it arrives, then puts it in the store (when put) and ends the claim.
func (f *flight) fetch(ctx context.Context, held *heldClaim, put bool) error {
	if held != nil {
		f.owning.Store(true)
		stop := f.s.heartbeat(ctx, f.id, held, f.fetched)
		defer func() {
			stop()
			f.s.endClaims(ctx, f.id, held.gen)
		}()
	}
	f.update(func() { f.local = true }) // readers follow this fetch, not one of their own
	epoch := f.s.verified.now()
	body, err := f.o.up.FetchRange(ctx, f.start, f.size)
	if err != nil {
		return err
	}
	defer body.Close()
	// Room for the trailer the object carries, so sealing it does not
	// copy the chunk (readers never look past f.size).
	buf := make([]byte, f.size, f.size+trailerLen)
	f.update(func() { f.buf = buf })
	var have int64
	for have < f.size {
		n, err := body.Read(buf[have:])
		have += int64(n)
		if n > 0 {
			f.update(func() { f.have = have })
		}
		if err != nil && have < f.size {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	// Kept as readers of the store would get it back, so that the fills
	// after this flight's need not read it there; capped, so that sealing
	// (which appends to buf) never shows in it.
	f.s.verified.add(verifiedKey{id: f.id, size: f.size}, buf[:f.size:f.size], epoch)
	if put && f.s.usable() {
		// Generous: a whole chunk goes up in one request.
		pctx, cancel := context.WithTimeout(ctx, 4*f.s.opts.OpTimeout)
		err := f.s.objs.Create(pctx, f.s.chunkKey(f.id), f.s.seal.seal(f.id, f.s.opts.ChunkSize, buf))
		f.s.observe(pctx, err)
		cancel()
		if err != nil && !errors.Is(err, sharedstore.ErrExists) {
			f.s.log.Warn("shared store: could not put a chunk", "key", f.s.chunkKey(f.id), "err", err)
		}
	}
	return nil
}

// fetched is how many bytes of the chunk this node has fetched.
func (f *flight) fetched() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.have
}

// update changes the flight's state under its lock and wakes its readers.
func (f *flight) update(fn func()) {
	f.mu.Lock()
	fn()
	close(f.wake)
	f.wake = make(chan struct{})
	f.mu.Unlock()
}

// reader returns a reader of [from, to) of the chunk (offsets in it) for a
// reader of o, whose upstream it reads when it must go around the flight.
func (f *flight) reader(ctx context.Context, o *Origin, from, to int64) io.ReadCloser {
	return &flightReader{f: f, o: o, ctx: ctx, pos: from, end: to}
}

// fallbackBlock is how much a waiting reader past FallbackAfter reads from
// upstream at a time, between looks at whether the chunk has arrived.
const fallbackBlock = 1 << 20

// flightReader reads a chunk from its flight's buffer as it fills, or from
// the store once the flight says it landed there, or, while the flight
// waits on another node that is slow to deliver, from upstream block by
// block (direct).
type flightReader struct {
	f        *flight
	o        *Origin // the reader's
	ctx      context.Context
	pos, end int64         // offsets in the chunk
	src      io.ReadCloser // once landed: the store (or upstream); or a direct block
	srcEnd   int64         // where src ends
	direct   bool          // past FallbackAfter: reads go upstream until the chunk arrives
	idle     time.Time     // when this reader began waiting for a byte; zero: not waiting
	left     atomic.Bool
	stored   int64 // bytes of closed srcs that the store served
}

// StoreBytes is how many of the bytes read so far the store served: those
// of the landed chunk, never the flight's buffer (this node's upstream
// fetch) or a direct block.
func (r *flightReader) StoreBytes() int64 { return r.stored + storeBytesOf(r.src) }

func (r *flightReader) Read(p []byte) (int, error) {
	f := r.f
	for {
		if r.pos >= r.end {
			return 0, io.EOF
		}
		p := p[:min(int64(len(p)), r.end-r.pos)]
		if r.src != nil {
			n, err := r.src.Read(p[:min(int64(len(p)), r.srcEnd-r.pos)])
			r.pos += int64(n)
			if r.pos < r.srcEnd || r.srcEnd == r.end {
				if errors.Is(err, io.EOF) && r.pos < r.srcEnd {
					err = io.ErrUnexpectedEOF
				}
				return n, err
			}
			// A direct block is done: look again at where the rest is.
			r.stored += storeBytesOf(r.src)
			r.src.Close()
			r.src = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		f.mu.Lock()
		landed, have, buf, err, wake, local := f.landed, f.have, f.buf, f.err, f.wake, f.local
		f.mu.Unlock()
		switch {
		case r.pos < have:
			n := copy(p, buf[r.pos:have])
			r.pos += int64(n)
			r.idle = time.Time{}
			return n, nil
		case err != nil:
			return 0, err
		case landed:
			if err := r.openLanded(); err != nil {
				return 0, err
			}
			continue
		case !local && (r.direct || r.waited() >= f.s.opts.FallbackAfter):
			// Another node fetches the chunk and is slow to: do not
			// starve the client, read its bytes here.
			if !r.direct {
				r.direct = true
				f.s.log.Info("shared store: another node is slow to deliver a chunk; reading around it", "key", f.s.chunkKey(f.id))
			}
			if err := r.openDirect(); err != nil {
				return 0, err
			}
			continue
		}
		if err := r.wait(wake, !local); err != nil {
			return 0, err
		}
	}
}

// wait waits for the flight to change (wake), or, when it waits on another
// node (fallback), until this reader has waited FallbackAfter.
func (r *flightReader) wait(wake <-chan struct{}, fallback bool) error {
	var timeout <-chan time.Time
	if fallback {
		t := time.NewTimer(r.f.s.opts.FallbackAfter - r.waited())
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-wake:
	case <-timeout:
	case <-r.ctx.Done():
		return context.Cause(r.ctx)
	}
	return nil
}

// waited is how long this reader has waited for a byte, starting the count
// if it was not waiting.
func (r *flightReader) waited() time.Duration {
	if r.idle.IsZero() {
		r.idle = time.Now()
	}
	return time.Since(r.idle)
}

// openDirect opens the next block of the reader's range from upstream.
func (r *flightReader) openDirect() error {
	f := r.f
	end := min(r.pos+fallbackBlock, r.end)
	src, err := r.o.up.FetchRange(r.ctx, f.start+r.pos, end-r.pos)
	if err != nil {
		return err
	}
	r.src, r.srcEnd = src, end
	return nil
}

// openLanded opens the landed chunk in the store, or, should it be gone
// again or the store fail, the same bytes from upstream.
func (r *flightReader) openLanded() error {
	f := r.f
	src, err := r.o.readStored(r.ctx, f.id, f.size, r.pos, r.end, nil)
	if err != nil {
		if r.ctx.Err() != nil {
			return err
		}
		if src, err = r.o.up.FetchRange(r.ctx, f.start+r.pos, r.end-r.pos); err != nil {
			return err
		}
	}
	r.src, r.srcEnd = src, r.end
	return nil
}

func (r *flightReader) Close() error {
	if r.left.CompareAndSwap(false, true) {
		r.f.s.leave(r.f)
	}
	if r.src != nil {
		return r.src.Close()
	}
	return nil
}
