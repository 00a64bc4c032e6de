package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
)

// Handle reads one file of the store. It is an io.ReaderAt whose reads block
// until the bytes are present, filling them from the Origin given to Open.
// ReadAt may be called concurrently; Close releases the file for eviction and
// cancels the handle's read-ahead that no other reader waits for.
type Handle struct {
	s      *Store
	it     *item
	origin Origin
	// ctx bounds every wait of this handle. Storing it is deliberate: a
	// Handle is the lifetime of one client request, which ctx belongs to.
	ctx context.Context
	// file is it.file at Open; it stays open (and follows promotion's rename)
	// while the handle holds its reference.
	file *os.File
	// stopAbandon unregisters abandon from ctx (see Store.Open); nil for
	// a handle of a complete item, which has no read-ahead to abandon.
	stopAbandon func() bool
	closed      atomic.Bool

	// Guarded by it.mu, as it is read while planning fills.
	gone bool // closed or ctx ended: plans no read-ahead (see ahead.go)

	mu sync.Mutex
	// Guarded by mu.
	win  ranges.Range // Expect window; read-ahead stays inside it
	seen ranges.Set   // bytes returned while the file was partial
	pace pace         // read-ahead depth (pace.go)

	paceCounted atomic.Bool // counted in Store.readers; set under mu
}

var _ io.ReaderAt = (*Handle)(nil)

var errNegativeOffset = errors.New("cache: negative offset")

// Size is the file's size in bytes.
func (h *Handle) Size() int64 { return h.it.size }

// Complete reports whether the file is served from a verified blob.
func (h *Handle) Complete() bool { return h.it.complete.Load() }

// Expect says the caller will read [off, end) sequentially. Reads inside that
// window keep up to Options.ReadAhead chunks in flight ahead of them, never
// past end. Without a window there is no read-ahead.
func (h *Handle) Expect(off, end int64) {
	off, end = max(off, 0), min(end, h.it.size)
	h.mu.Lock()
	defer h.mu.Unlock()
	if end <= off {
		h.win = ranges.Range{}
		return
	}
	h.win = ranges.Range{Pos: off, End: end}
}

// Close releases the handle and cancels the read-ahead it started that no
// other reader waits for. It is idempotent.
func (h *Handle) Close() error {
	if h.closed.Swap(true) {
		return nil
	}
	if h.stopAbandon != nil {
		h.stopAbandon()
		h.abandon()
	}
	h.unpace()
	h.s.release(h.it)
	return nil
}

// ReadAt reads len(p) bytes at off, waiting for fills as needed. The read
// that completes a handle's reading of the whole file waits until the file
// is verified and returns *VerifyError if it is not.
func (h *Handle) ReadAt(p []byte, off int64) (int, error) {
	if h.closed.Load() || h.s.isClosed() {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, errNegativeOffset
	}
	size := h.it.size
	if off >= size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := min(int64(len(p)), size-off)
	var eof error
	if n < int64(len(p)) {
		eof = io.EOF
	}
	if n == 0 {
		return 0, nil
	}
	if h.it.complete.Load() {
		if h.paceCounted.Load() {
			h.unpace() // no more fills: leave the connections to others
		}
		m, err := h.file.ReadAt(p[:n], off)
		if err == nil {
			err = eof
		}
		return m, err
	}

	need := ranges.Range{Pos: off, End: off + n}
	aheadEnd, final, inWindow := h.ahead(need)
	waited, err := h.ensure(need, aheadEnd, final)
	if err != nil {
		return 0, err
	}
	if inWindow {
		h.paced(n, waited)
	}
	m, err := h.file.ReadAt(p[:n], off)
	if err != nil {
		return m, err
	}
	if h.coversFile(need) {
		if err := h.waitVerdict(); err != nil {
			return 0, err
		}
	}
	return m, eof
}

// ahead returns how far read-ahead for need should reach, whether that is
// the end of the Expect window, and whether need is inside the window.
func (h *Handle) ahead(need ranges.Range) (end int64, final, inWindow bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	win := h.win
	if win.IsEmpty() || need.Pos < win.Pos || need.Pos >= win.End {
		return need.End, true, false
	}
	end = min(win.End, need.Pos+int64(h.depthLocked())*h.s.opts.ChunkSize)
	return max(end, need.End), end >= win.End, true
}

// coversFile records that need was returned and reports whether this handle
// has now read every byte of the file.
func (h *Handle) coversFile(need ranges.Range) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen.Insert(need)
	return h.seen.Present(ranges.Range{Pos: 0, End: h.it.size})
}

// ensure returns once need is present, and whether it had to wait for it,
// starting fills for the missing blocks of need and of the read-ahead up to
// aheadEnd that nobody is fetching, and adopting the read-ahead of other handles that holds blocks of need. It
// plans again on every wake-up, so blocks a failed or cancelled fill released
// are claimed anew (bounded by exhaustedLocked).
func (h *Handle) ensure(need ranges.Range, aheadEnd int64, final bool) (waited bool, err error) {
	it, s := h.it, h.s
	for ; ; waited = true {
		it.mu.Lock()
		if it.state == stateFailed {
			err := it.err
			it.mu.Unlock()
			return waited, err
		}
		ready := it.state == stateComplete || it.present.Present(need)
		if !ready && h.ctx.Err() != nil {
			// The reader has left: claim nothing on its behalf.
			it.mu.Unlock()
			return waited, h.ctx.Err()
		}
		if !ready {
			if err := it.exhaustedLocked(need); err != nil {
				it.mu.Unlock()
				return waited, err
			}
		}
		if !ready && h.origin == nil {
			it.mu.Unlock()
			return waited, fmt.Errorf("%w: bytes %d-%d of %s (no origin)", ErrNotCached, need.Pos, need.End-1, it.key.etag)
		}
		var jobs []fillJob
		if it.state == statePartial && h.origin != nil {
			end, fin := aheadEnd, final
			if h.gone {
				// Closed, or its context ended, while this read was
				// in flight: read-ahead would be cancelled at once.
				end, fin = need.End, true
			}
			jobs = h.jobsLocked(need, it.planLocked(need, end, fin, s.opts.ChunkSize, s.opts.AlignFills))
		}
		if !ready {
			it.adoptLocked(h, need)
		}
		ch := it.changed
		it.mu.Unlock()

		if len(jobs) > 0 {
			s.startFills(it, h.origin, jobs)
		}
		if ready {
			return waited, nil
		}
		if s.isClosed() {
			return waited, ErrClosed
		}
		if s.hooks.wait != nil {
			s.hooks.wait()
		}
		s.waiters.Add(1)
		select {
		case <-ch:
			s.waiters.Add(-1)
		case <-h.ctx.Done():
			s.waiters.Add(-1)
			return waited, h.ctx.Err()
		}
	}
}

// waitVerdict waits until the item is promoted (nil) or failed verification
// (its error).
func (h *Handle) waitVerdict() error {
	it := h.it
	for {
		it.mu.Lock()
		state, err, ch := it.state, it.err, it.changed
		it.mu.Unlock()
		switch state {
		case stateComplete:
			return nil
		case stateFailed:
			return err
		}
		if h.s.isClosed() {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-h.ctx.Done():
			return h.ctx.Err()
		}
	}
}

// Present reports how many bytes of [off, end) are already in the cache, so
// a caller can tell a hit from a partial hit or a miss before reading.
func (h *Handle) Present(off, end int64) int64 {
	r := ranges.Range{Pos: max(off, 0), End: min(end, h.it.size)}
	if r.IsEmpty() {
		return 0
	}
	if h.it.complete.Load() {
		return r.Size()
	}
	h.it.mu.Lock()
	defer h.it.mu.Unlock()
	missing := int64(0)
	for _, m := range h.it.present.Missing(r) {
		missing += m.Size()
	}
	return r.Size() - missing
}

// OpenBlob opens a new descriptor on the verified blob, for zero-copy
// serving (http.ServeContent over an *os.File uses sendfile), or returns
// ErrNotCached while the file is partial. The caller closes it; it stays
// readable even if the blob is evicted afterwards, and while the handle is
// open the blob is not evicted at all.
func (h *Handle) OpenBlob() (*os.File, error) {
	if !h.Complete() {
		return nil, ErrNotCached
	}
	return os.Open(h.it.blobPath)
}
