package cache

import (
	"encoding/hex"
	"hash"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// runningHash verifies a partial as it fills: it hashes the file's present
// prefix as that prefix grows, so promotion does not have to read and hash
// the whole file after its last byte arrived, a pass that would otherwise
// sit between a cold download's last byte and its verdict.
//
// Fills arrive out of order; only the contiguous prefix from offset 0 can be
// hashed, which whichever fill extends it hashes, reading those bytes back
// from the data file (just written, so from the page cache). TryLock keeps
// fills from queueing behind one another: a fill that finds the hash busy
// leaves the work to the one holding it, which loops until it has caught up.
type runningHash struct {
	mu   sync.Mutex // held while hashing; guards the fields below
	h    hash.Hash
	off  int64    // bytes of the file hashed so far
	file *os.File // the open data file those bytes were read from

	// done mirrors off for readers that must not take mu (which is held
	// across file reads): tests and metrics.
	done atomic.Int64
}

// hashStep is how much of the prefix one read hashes.
const hashStep = 1 << 20

// advanceHash hashes the item's present prefix beyond what is hashed. With
// wait false it returns at once if another goroutine is hashing (that one
// will pick up this fill's blocks too); with wait true it waits for it and
// catches up, as promotion needs. It reports the hex sum once the whole
// file is hashed, else "".
func (s *Store) advanceHash(it *item, wait bool) string {
	rh := &it.hash
	if wait {
		rh.mu.Lock()
	} else if !rh.mu.TryLock() {
		return ""
	}
	defer rh.mu.Unlock()
	var buf []byte // taken from the store's pool on first use
	defer func() {
		if buf != nil {
			s.hashBufs.Put(&buf)
		}
	}()
	for {
		it.mu.Lock()
		file := it.file
		if rh.h == nil || file != rh.file {
			// A reopened data file may have lost bytes (the present set
			// shrank to match it); what was hashed from the old one no
			// longer counts.
			rh.h, rh.off, rh.file = hub.NewHash(hub.ETagKind(it.key.etag), it.size), 0, file
			rh.done.Store(0)
		}
		if rh.off >= it.size {
			it.mu.Unlock()
			break
		}
		end := rh.off
		for _, r := range it.present.Ranges() {
			if r.Pos <= rh.off && rh.off < r.End {
				end = r.End
				break
			}
		}
		it.mu.Unlock()
		if end <= rh.off || file == nil || s.isClosed() {
			return ""
		}
		n := min(end-rh.off, hashStep)
		if buf == nil {
			if p, ok := s.hashBufs.Get().(*[]byte); ok {
				buf = *p
			} else {
				buf = make([]byte, hashStep)
			}
		}
		if _, err := file.ReadAt(buf[:n], rh.off); err != nil && err != io.EOF {
			// Leave it to promotion's own pass, which reports errors.
			rh.h, rh.off = nil, 0
			rh.done.Store(0)
			return ""
		}
		rh.h.Write(buf[:n])
		rh.off += n
		rh.done.Store(rh.off)
	}
	return hex.EncodeToString(rh.h.Sum(nil))
}

// kickHash makes sure a goroutine is advancing the item's running hash,
// starting one if none is: fills only kick it, so they never spend their
// upstream slot hashing.
func (s *Store) kickHash(it *item) {
	if !it.hashing.CompareAndSwap(false, true) {
		it.hashAgain.Store(true)
		return
	}
	started := s.goTracked(it, func() {
		for {
			s.advanceHash(it, true)
			it.hashing.Store(false)
			if !it.hashAgain.Swap(false) || !it.hashing.CompareAndSwap(false, true) {
				return
			}
		}
	})
	if !started {
		it.hashing.Store(false)
	}
}
