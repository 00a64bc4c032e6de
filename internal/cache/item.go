package cache

import (
	"container/list"
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// itemState is where an item is in its life: filling, being verified,
// complete, or failed verification.
type itemState int

const (
	statePartial   itemState = iota // filling; data in .hubproxy/partial
	statePromoting                  // every byte present, being hashed and renamed
	stateComplete                   // verified blob under blobs/
	stateFailed                     // verification (or promotion I/O) failed; err says why
)

// itemKey identifies an item: content is addressed by etag, and blobs live
// per repo in the HF layout, so the repo is part of the key.
type itemKey struct {
	repo hub.Repo
	etag string
}

// link is one (commit, path) under which a file was opened; each becomes a
// snapshot symlink at promotion.
type link struct {
	Commit string `json:"commit"`
	Path   string `json:"path"`
}

// maxLinks caps the links remembered per item; more are recreated on Open.
const maxLinks = 64

// blockFail counts consecutive failed fills that stopped at one block.
type blockFail struct {
	n   int
	err error
}

// item is one file of the cache, partial or complete.
//
// Lock order: Store.mu, then item.saveMu, then item.mu (see store.go);
// item.hash.mu comes before item.mu and is never taken under it.
type item struct {
	// Immutable after creation.
	key         itemKey
	size        int64
	blockSize   int64
	dataPath    string
	sidecarPath string
	blobPath    string
	used        *atomic.Int64 // Store.used, which mirrors the sum of every item's bytes

	// refs counts open handles, fills and promotions using the item. It moves
	// between 0 and 1 only under Store.mu (so eviction, which holds Store.mu,
	// sees a stable zero); a holder of a reference may add more without it.
	refs atomic.Int32
	// complete mirrors state == stateComplete for the handle's lock-free path.
	complete atomic.Bool
	// bytes is what the item counts against the budget: size for a blob,
	// present bytes for a partial. Changes are mirrored into Store.used.
	bytes atomic.Int64

	// Guarded by Store.mu.
	elem     *list.Element // position in Store.lru; nil once removed
	idleElem *list.Element // position in Store.idle while a blob's file stays open unreferenced
	removed  bool          // no longer in Store.items (evicted or failed)

	// saveMu serialises sidecar saves with each other and with promotion's
	// removal of the sidecar.
	saveMu    sync.Mutex
	savedSize int64 // present bytes the sidecar on disk claims; guarded by saveMu
	savedLink int   // len(links) when the sidecar was saved; guarded by saveMu

	// hash is the running hash of the present prefix (hashing.go); hashing
	// and hashAgain coordinate the one goroutine advancing it.
	hash      runningHash
	hashing   atomic.Bool
	hashAgain atomic.Bool

	// failures counts fills that failed, for read-ahead pacing (pace.go).
	failures atomic.Uint64

	mu sync.Mutex
	// Guarded by mu.
	state   itemState
	err     error    // why the item failed, in stateFailed
	file    *os.File // open while refs > 0 (and for a blob, while in Store.idle): the sparse data file, or the blob
	present ranges.Set
	pending ranges.Set              // blocks claimed by fills in flight
	ahead   map[*aheadFill]struct{} // the read-ahead among those fills, which handles may cancel
	fails   map[int64]blockFail     // by block offset; cleared when the block arrives
	links   []link
	linked  map[link]bool // snapshot symlinks of a blob known to exist, so Open need not check each time
	changed chan struct{} // closed (and replaced) on every change readers wait for
}

func newItem(key itemKey, size, blockSize int64, p paths, used *atomic.Int64) *item {
	return &item{
		used:        used,
		key:         key,
		size:        size,
		blockSize:   blockSize,
		dataPath:    p.partialData(key.repo, key.etag),
		sidecarPath: p.sidecar(key.repo, key.etag),
		blobPath:    p.blob(key.repo, key.etag),
		fails:       make(map[int64]blockFail),
		changed:     make(chan struct{}),
	}
}

// addBytes changes what the item counts against the budget.
func (it *item) addBytes(d int64) {
	it.bytes.Add(d)
	it.used.Add(d)
}

// broadcastLocked wakes every goroutine waiting on it.changed.
func (it *item) broadcastLocked() {
	close(it.changed)
	it.changed = make(chan struct{})
}

// blocksOf rounds r out to whole blocks, clipped to the file's end (whose last
// block may be short).
func (it *item) blocksOf(r ranges.Range) ranges.Range {
	bs := it.blockSize
	return ranges.Range{Pos: r.Pos / bs * bs, End: min(it.size, (r.End+bs-1)/bs*bs)}
}

// addLinkLocked remembers that the item was opened as (commit, path).
func (it *item) addLinkLocked(l link) {
	for _, have := range it.links {
		if have == l {
			return
		}
	}
	if len(it.links) < maxLinks {
		it.links = append(it.links, l)
	}
}

// planLocked claims the blocks that are neither present nor pending in
// [need.Pos, aheadEnd) and returns them as upstream requests of at most chunk
// bytes each. Contiguous missing blocks become one request, except that the
// blocks need covers and the read-ahead beyond them never share one. A run lying wholly
// beyond need that is shorter than a chunk and ends at aheadEnd is left for a
// later call unless final is set (aheadEnd is the end of the caller's window),
// so read-ahead requests stay chunk-sized as the window slides. Read-ahead
// also skips a run whose last fill failed, so a failing upstream is retried
// only as fast as readers actually need the bytes. With align, requests
// split at multiples of chunk from the file's start, and read-ahead short of
// the window's end stops at one, so each request lies within one chunk
// (Options.AlignFills).
func (it *item) planLocked(need ranges.Range, aheadEnd int64, final bool, chunk int64, align bool) []ranges.Range {
	if align && !final {
		aheadEnd = max(aheadEnd/chunk*chunk, need.End)
	}
	needBlocks := it.blocksOf(need)
	region := it.blocksOf(ranges.Range{Pos: need.Pos, End: max(need.End, aheadEnd)})
	var out []ranges.Range
	claim := func(u ranges.Range) {
		for pos := u.Pos; pos < u.End; {
			end := min(pos+chunk, u.End)
			if align {
				end = min((pos/chunk+1)*chunk, u.End)
			}
			r := ranges.Range{Pos: pos, End: end}
			it.pending.Insert(r)
			out = append(out, r)
			pos = end
		}
	}
	for _, m := range it.present.Missing(region) {
		for _, u := range it.pending.Missing(m) {
			// The needed blocks and the read-ahead are claimed as
			// separate requests: a needed fill runs to completion
			// whoever leaves, read-ahead is cancelled with its reader,
			// so a chunk must not straddle the two.
			if u.Pos < needBlocks.End {
				claim(ranges.Range{Pos: u.Pos, End: min(u.End, needBlocks.End)})
				if u.End <= needBlocks.End {
					continue
				}
				u.Pos = needBlocks.End
			}
			if u.End == region.End && !final && u.Size() < chunk {
				continue // wait until a whole chunk can be claimed
			}
			if it.fails[u.Pos].n > 0 {
				continue // failed lately: only a reader that needs it retries
			}
			claim(u)
		}
	}
	return out
}

// exhaustedLocked returns a *FillError when a block of need that nobody is
// fetching has already failed maxFillAttempts times. It forgets the count, so
// a later read starts afresh rather than failing forever.
func (it *item) exhaustedLocked(need ranges.Range) error {
	if len(it.fails) == 0 {
		return nil
	}
	nb := it.blocksOf(need)
	for off, f := range it.fails {
		if off < nb.Pos || off >= nb.End || f.n < maxFillAttempts {
			continue
		}
		b := it.blocksOf(ranges.Range{Pos: off, End: off + 1})
		if it.present.Present(b) || it.pending.Present(b) {
			continue
		}
		delete(it.fails, off)
		return &FillError{Off: off, Attempts: f.n, Err: f.err}
	}
	return nil
}

// markPresentLocked records that r (one block, already written to the data
// file) is present. It reports whether this made the file whole, in which case
// the item has moved to statePromoting and the caller must start promotion.
func (it *item) markPresentLocked(r ranges.Range) (whole bool) {
	before := it.present.Size()
	it.present.Insert(r)
	it.pending.Remove(r)
	delete(it.fails, r.Pos)
	it.addBytes(it.present.Size() - before)
	it.broadcastLocked()
	if it.state == statePartial && it.present.Size() == it.size {
		it.state = statePromoting
		return true
	}
	return false
}

// releaseLocked hands back the claim on r, which a cancelled fill did not
// get to, for whoever needs it next. Cancellation says nothing about the
// upstream, so unlike failLocked it counts nothing against the blocks.
func (it *item) releaseLocked(r ranges.Range) {
	it.pending.Remove(r)
	it.broadcastLocked()
}

// failLocked releases the claim on r after a fill stopped at r.Pos with err,
// and counts the failure against that block.
func (it *item) failLocked(r ranges.Range, err error) {
	it.pending.Remove(r)
	it.failures.Add(1)
	f := it.fails[r.Pos]
	f.n++
	var se *StorageError
	if errors.As(err, &se) {
		// Fetching again cannot help a full or broken disk: give the
		// reader the error now, so it can serve the bytes another way.
		f.n = max(f.n, maxFillAttempts)
	}
	f.err = err
	it.fails[r.Pos] = f
	it.broadcastLocked()
}

// dropBeyondLocked forgets present ranges past n bytes (the data file's real
// length) and any partial block at the new end, so nothing is claimed present
// that was not durably written.
func (it *item) dropBeyondLocked(n int64) {
	if n >= it.size {
		return
	}
	cut := n / it.blockSize * it.blockSize
	before := it.present.Size()
	it.present.Remove(ranges.Range{Pos: cut, End: it.size})
	it.addBytes(it.present.Size() - before)
}

// alignLocked keeps only whole blocks of the present set (a sidecar saved
// with another block size may hold partial ones), preserving the invariant
// that present is a union of blocks.
func (it *item) alignLocked() {
	var out ranges.Set
	bs := it.blockSize
	for _, r := range it.present.Ranges() {
		pos := (r.Pos + bs - 1) / bs * bs
		end := r.End / bs * bs
		if r.End == it.size {
			end = r.End
		}
		out.Insert(ranges.Range{Pos: pos, End: end})
	}
	before := it.present.Size()
	it.present = out
	it.addBytes(it.present.Size() - before)
}
