package cache

import (
	"context"
	"errors"
	"io"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
)

// goTracked runs fn on a new goroutine that holds a reference to it and is
// counted in s.wg, unless the store is closing. The caller must itself hold a
// reference to it, which makes taking another without Store.mu safe.
func (s *Store) goTracked(it *item, fn func()) bool {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return false
	}
	it.refs.Add(1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.release(it)
		fn()
	}()
	return true
}

// startFills starts one fill per planned job.
func (s *Store) startFills(it *item, o Origin, jobs []fillJob) {
	for i, j := range jobs {
		if !s.goTracked(it, func() { s.fill(it, o, j) }) {
			// Closing: hand the claims back so nothing waits on them.
			it.mu.Lock()
			for _, j := range jobs[i:] {
				it.endAheadLocked(j.ahead)
				it.pending.Remove(j.r)
			}
			it.broadcastLocked()
			it.mu.Unlock()
			return
		}
	}
}

// fill fetches j.r (block-aligned, claimed in it.pending) with one upstream
// request. Each block is written to the data file and then marked present, so
// readers are served while the rest streams in. When the fill stops early the
// blocks already received stay present and the rest are released: counted as
// a failure against the block it stopped at, unless it was read-ahead its
// handle abandoned, which says nothing about the upstream. The sidecar is
// saved either way.
func (s *Store) fill(it *item, o Origin, j fillJob) {
	r := j.r
	pos, err := s.fetchInto(j.ctx, it, o, r)
	it.mu.Lock()
	abandoned := it.endAheadLocked(j.ahead)
	switch {
	case err == nil:
	case abandoned:
		it.releaseLocked(ranges.Range{Pos: pos, End: r.End})
	default:
		it.failLocked(ranges.Range{Pos: pos, End: r.End}, err)
	}
	it.mu.Unlock()
	if err != nil && !abandoned {
		s.stats.fillErrors.Add(1)
		if s.opts.OnFillError != nil && !s.isClosed() {
			s.opts.OnFillError(err)
		}
		if !s.isClosed() {
			s.log.Warn("cache: fill failed", "repo", it.key.repo.String(), "etag", it.key.etag,
				"range", r.String(), "at", pos, "err", err)
		}
	}
	if pos > r.Pos {
		s.saveSidecar(it)
	}
}

// fetchInto does the request of fill and returns how far it got. ctx is the
// job's: detached from the reader, but cancelled when read-ahead is abandoned.
func (s *Store) fetchInto(ctx context.Context, it *item, o Origin, r ranges.Range) (pos int64, err error) {
	pos = r.Pos
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		return pos, ErrClosed
	case <-ctx.Done():
		return pos, context.Cause(ctx) // abandoned before it started
	}
	defer func() { <-s.sem }()
	// The slot may have come free because the handle that planned this
	// read-ahead is abandoning it: abandonLocked cancels each of its fills
	// in turn, under it.mu, and the one cancelled first may have let go of
	// the slot before this one's turn. Taking it.mu waits for that loop to
	// end, so the check below sees this fill's cancellation.
	it.mu.Lock()
	it.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return pos, err // select picks at random among ready cases
	}

	// Reserve the chunk's bytes (released block by block as they become
	// present, or all at once when the fill ends) so that concurrent fills
	// see each other when deciding how much to evict.
	s.reserved.Add(r.Size())
	defer func() { s.reserved.Add(-(r.End - pos)) }()
	s.evictFor()
	// Bounded by FillTimeout and by the store's lifetime.
	ctx, cancel := context.WithTimeout(ctx, s.opts.FillTimeout)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()

	s.stats.fillRequests.Add(1)
	s.stats.fillBytes.Add(r.Size())
	body, err := o.FetchRange(ctx, r.Pos, r.Size())
	if err != nil {
		return pos, err
	}
	defer body.Close()

	it.mu.Lock()
	file := it.file // open: this goroutine holds a reference
	it.mu.Unlock()
	tally := TallyFrom(ctx).For(body) // the request that started this fill, if it counts
	buf := make([]byte, min(it.blockSize, r.Size()))
	var unsaved int64 // bytes made present since the sidecar was last saved
	for pos < r.End {
		// Stop at a block boundary once cancelled, even if the body
		// would go on (reads from it should fail, but need not).
		if err := ctx.Err(); err != nil {
			return pos, err
		}
		n := min(it.blockSize, r.End-pos)
		if _, err := io.ReadFull(body, buf[:n]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // a short body, not a clean end
			}
			return pos, err
		}
		tally.Add(n)
		if _, err := file.WriteAt(buf[:n], pos); err != nil {
			return pos, &StorageError{Err: err}
		}
		it.mu.Lock()
		whole := it.markPresentLocked(ranges.Range{Pos: pos, End: pos + n})
		it.mu.Unlock()
		s.kickHash(it)
		s.reserved.Add(-n)
		if whole {
			s.startPromote(it)
		}
		pos += n
		// Record progress during long fills too, so that a killed
		// process resumes with at most this much refetched per fill.
		if unsaved += n; unsaved >= sidecarSaveEvery && !whole {
			s.saveSidecar(it)
			unsaved = 0
		}
	}
	return pos, nil
}

// sidecarSaveEvery is how much a fill writes between sidecar saves (each
// save fsyncs the data file first).
const sidecarSaveEvery = 2 << 20
