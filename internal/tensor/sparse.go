package tensor

import (
	"sort"
	"sync"
)

// RangeReader is a Blob that reads many ranges in one call, taking what it
// holds from the cache and the rest straight from upstream, uncached, in as
// few requests as it can (repofs.File does). Sparse assemblies read through
// it.
type RangeReader interface {
	// ReadRanges reads len(bufs[i]) bytes at offs[i] into bufs[i], for
	// every i; on error the buffers' contents are undefined.
	ReadRanges(bufs [][]byte, offs []int64) error
}

const (
	// sparseBatch is how many assembled bytes a sparse read fetches at a
	// time: a few thousand pieces of a typical column shard, enough for
	// several parallel multipart requests, while one reader holds at most
	// two batches (the one it reads and the next).
	sparseBatch = 4 << 20
	// sparseLoads bounds the batches of one assembly loading at once, so
	// concurrent readers (the GPU stager) cannot multiply its upstream
	// requests without bound.
	sparseLoads = 2
	// sparseSlack is the waste below which a read stays on the cached path
	// however sparse it is: block rounding costing up to this much more
	// (a small tensor's one or two blocks, a short slice) buys bytes that
	// are cached and served from disk next time.
	sparseSlack = 1 << 20
)

// isSparse reports whether reading pieces through the cache, whose fills
// fetch every block of each run whole, would cost over 1.5 times the
// pieces' bytes and over sparseSlack more: the pieces are short and far
// apart, as a column shard of a row-major tensor is (a short piece of every
// row, so every block is fetched for a fraction of it). Such a read goes
// through RangeReader instead, which every blob must then be.
func isSparse(pieces []Piece, runs []run, block int64) bool {
	if block <= 0 {
		return false
	}
	var want, dense int64
	for _, p := range pieces {
		if _, ok := p.Blob.(RangeReader); !ok {
			return false
		}
		want += p.Len
	}
	for _, r := range runs {
		dense += (r.end+block-1)/block*block - r.off/block*block
	}
	return 2*dense > 3*want && dense-want > sparseSlack
}

// sparseReads is the state of a sparse assembly's reads: the batches being
// loaded or read out. A batch is loaded whole on its first read, and the
// next one once half of it has been read, so a sequential reader rarely
// waits; it is dropped once every byte of it has been read, leaving spent
// in its place so that it is not loaded ahead again (a re-read loads it
// again).
type sparseReads struct {
	loads chan struct{} // a slot per batch loading

	mu      sync.Mutex
	batches map[int64]*batch // guarded by mu
}

// spent marks a batch every byte of which has been read.
var spent = &batch{}

// batch is one sparseBatch of assembled bytes.
type batch struct {
	ready chan struct{} // closed once data or err is set
	data  []byte
	err   error

	// Guarded by sparseReads.mu.
	left  int64 // bytes not yet read out
	ahead bool  // the next batch's load has been started
}

func newSparseReads() *sparseReads {
	return &sparseReads{loads: make(chan struct{}, sparseLoads), batches: map[int64]*batch{}}
}

// readSparse is ReadAt for the pieces of a sparse assembly: p from pos on,
// n bytes of it already filled (by the prefix).
func (a *Assembly) readSparse(p []byte, off int64, n int) (int, error) {
	base := int64(len(a.prefix))
	for n < len(p) && off+int64(n) < a.size {
		pos := off + int64(n)
		k := (pos - base) / sparseBatch
		b, err := a.batchAt(k)
		if err != nil {
			return n, err
		}
		m := copy(p[n:], b.data[pos-base-k*sparseBatch:])
		n += m
		a.readOut(k, b, int64(m))
	}
	return n, nil
}

// batchAt returns batch k once loaded, starting its load if nobody has.
func (a *Assembly) batchAt(k int64) (*batch, error) {
	s := a.sparse
	s.mu.Lock()
	b := s.batches[k]
	if b == nil || b == spent {
		b = a.startLoadLocked(k)
	}
	s.mu.Unlock()
	<-b.ready
	if b.err != nil {
		s.mu.Lock()
		if s.batches[k] == b {
			delete(s.batches, k) // the next read tries again
		}
		s.mu.Unlock()
		return nil, b.err
	}
	return b, nil
}

// readOut records that m bytes of batch k were read: the batch is dropped
// once all were, and the next one starts loading once half were.
func (a *Assembly) readOut(k int64, b *batch, m int64) {
	s := a.sparse
	s.mu.Lock()
	defer s.mu.Unlock()
	b.left -= m
	if b.left <= 0 && s.batches[k] == b {
		s.batches[k] = spent // its bytes go once the readers holding it are done
	}
	if next := k + 1; !b.ahead && 2*b.left <= int64(len(b.data)) && next*sparseBatch < a.size-int64(len(a.prefix)) {
		b.ahead = true
		if s.batches[next] == nil {
			a.startLoadLocked(next)
		}
	}
}

// startLoadLocked registers batch k and loads it in the background.
func (a *Assembly) startLoadLocked(k int64) *batch {
	base := int64(len(a.prefix))
	lo := base + k*sparseBatch
	hi := min(lo+sparseBatch, a.size)
	b := &batch{ready: make(chan struct{}), left: hi - lo}
	a.sparse.batches[k] = b
	go func() {
		a.sparse.loads <- struct{}{}
		defer func() { <-a.sparse.loads }()
		b.data, b.err = a.load(lo, hi)
		close(b.ready)
	}()
	return b
}

// load reads the assembled bytes [lo, hi), past the prefix, with one
// ReadRanges call per blob for the pieces (or parts of pieces) there.
func (a *Assembly) load(lo, hi int64) ([]byte, error) {
	data := make([]byte, hi-lo)
	type call struct {
		bufs [][]byte
		offs []int64
	}
	var order []Blob
	calls := map[Blob]*call{}
	i := sort.Search(len(a.pieces), func(i int) bool { return a.pieces[i].at+a.pieces[i].Len > lo })
	for ; i < len(a.pieces) && a.pieces[i].at < hi; i++ {
		pc := a.pieces[i]
		from, to := max(pc.at, lo), min(pc.at+pc.Len, hi)
		c := calls[pc.Blob]
		if c == nil {
			c = &call{}
			calls[pc.Blob] = c
			order = append(order, pc.Blob)
		}
		c.bufs = append(c.bufs, data[from-lo:to-lo])
		c.offs = append(c.offs, pc.Off+(from-pc.at))
	}
	for _, bl := range order {
		c := calls[bl]
		if err := bl.(RangeReader).ReadRanges(c.bufs, c.offs); err != nil {
			return nil, err
		}
	}
	return data, nil
}
