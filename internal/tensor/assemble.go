package tensor

import (
	"errors"
	"io"
	"sort"
	"sync"

	"github.com/hubproxy/hubproxy/internal/header"
)

// Piece is Len bytes of output that come from Blob at Off.
type Piece struct {
	Blob Blob
	Off  int64 // absolute offset in the blob's file
	Len  int64
	at   int64 // offset in the assembled output
	run  int   // index of the fetch run it belongs to
}

// run is a stretch of one blob fetched as a whole: pieces whose gaps are
// smaller than the merge distance, since block rounding would fetch those
// gaps anyway and one long request beats many short ones.
type run struct {
	blob     Blob
	off, end int64
}

// Assembly is a read-only view of pieces laid end to end: a tensor, a slice
// of one, or a whole subset file. It is an io.ReaderAt whose reads announce
// each fetch run to the cache as they enter it, so the bytes of a run are
// fetched in parallel ahead of the reader and nothing outside the runs is.
// A sparse assembly (isSparse: the cache's whole blocks would cost over 1.5
// times the pieces' bytes) reads its pieces through RangeReader instead, a
// batch at a time, so it costs about its own bytes upstream.
type Assembly struct {
	pieces []Piece
	runs   []run
	size   int64
	prefix []byte       // bytes served before the pieces (a subset file's header)
	sparse *sparseReads // nil for a read through the cache

	mu        sync.Mutex
	announced int // the run last announced to its blob, -1 for none; guarded by mu
}

// NewAssembly lays prefix and then pieces end to end. Pieces of the same
// blob closer than merge bytes share a fetch run. block is the cache's
// block size, the least a read through it fetches, by which the assembly
// tells whether it is sparse; 0 keeps every read on the cached path.
func NewAssembly(prefix []byte, pieces []Piece, merge, block int64) *Assembly {
	a := &Assembly{prefix: prefix, size: int64(len(prefix)), announced: -1}
	for _, p := range pieces {
		if p.Len <= 0 {
			continue
		}
		p.at = a.size
		a.size += p.Len
		if n := len(a.runs); n > 0 && a.runs[n-1].blob == p.Blob && p.Off >= a.runs[n-1].off && p.Off-a.runs[n-1].end <= merge {
			a.runs[n-1].end = max(a.runs[n-1].end, p.Off+p.Len)
		} else {
			a.runs = append(a.runs, run{blob: p.Blob, off: p.Off, end: p.Off + p.Len})
		}
		p.run = len(a.runs) - 1
		a.pieces = append(a.pieces, p)
	}
	if isSparse(a.pieces, a.runs, block) {
		a.sparse = newSparseReads()
	}
	return a
}

// Sparse reports whether the pieces are read around the cache (isSparse).
func (a *Assembly) Sparse() bool { return a.sparse != nil }

// Present is how many of the assembled bytes in [off, end) are already
// cached (the prefix always is).
func (a *Assembly) Present(off, end int64) int64 {
	end = min(end, a.size)
	if off >= end {
		return 0
	}
	n := max(min(end, int64(len(a.prefix)))-off, 0)
	for _, p := range a.pieces {
		lo, hi := max(off, p.at), min(end, p.at+p.Len)
		if lo < hi {
			n += p.Blob.Present(p.Off+lo-p.at, p.Off+hi-p.at)
		}
	}
	return n
}

// Complete reports whether every assembled byte is cached: no read waits
// or goes upstream.
func (a *Assembly) Complete() bool { return a.Present(0, a.size) == a.size }

// Begin prepares serving [off, end) next (whole: all of it, from 0): it
// reads the first byte now, so that an upstream failing outright is an
// error before anything is sent. Its bytes are needed first, and the cache
// keeps them for the body. Runs are announced to the cache as reads enter
// them, so there is nothing to expect beforehand, and whole changes
// nothing: each file under the assembly is verified by the cache.
func (a *Assembly) Begin(off, end int64, _ bool) error {
	if end <= off {
		return nil
	}
	var first [1]byte
	if _, err := a.ReadAt(first[:], off); err != nil && err != io.EOF {
		return err
	}
	return nil
}

// Bypassed reports whether any read went around the cache to upstream
// because the cache could not store a file (a blob that says so).
func (a *Assembly) Bypassed() bool {
	for _, r := range a.runs {
		if b, ok := r.blob.(interface{ Bypassed() bool }); ok && b.Bypassed() {
			return true
		}
	}
	return false
}

// Size is the assembled length.
func (a *Assembly) Size() int64 { return a.size }

// ReadAt reads assembled bytes. It is safe for concurrent use (the GPU
// stager reads pieces in parallel); read-ahead works best for one sequential
// reader, as http.ServeContent is.
func (a *Assembly) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("tensor: negative offset")
	}
	n := 0
	if off < int64(len(a.prefix)) {
		n = copy(p, a.prefix[off:])
	}
	var err error
	if a.sparse != nil {
		n, err = a.readSparse(p, off, n)
	} else {
		n, err = a.readCached(p, off, n)
	}
	if err != nil {
		return n, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readCached is ReadAt through the blobs' caches: p from off on, n bytes of
// it already filled (by the prefix).
func (a *Assembly) readCached(p []byte, off int64, n int) (int, error) {
	for n < len(p) && off+int64(n) < a.size {
		pos := off + int64(n)
		i := sort.Search(len(a.pieces), func(i int) bool { return a.pieces[i].at+a.pieces[i].Len > pos })
		pc := a.pieces[i]
		a.mu.Lock()
		if pc.run != a.announced {
			r := a.runs[pc.run]
			r.blob.Expect(r.off, r.end)
			a.announced = pc.run
		}
		a.mu.Unlock()
		within := pos - pc.at
		want := min(int64(len(p)-n), pc.Len-within)
		m, err := pc.Blob.ReadAt(p[n:n+int(want)], pc.Off+within)
		n += m
		if err != nil && !(err == io.EOF && int64(m) == want) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}

// TensorPieces maps byte ranges of t (relative to the tensor) in file f to
// pieces of blob.
func TensorPieces(f File, t header.Tensor, ranges []header.ByteRange, blob Blob) []Piece {
	base, _ := f.Header.FileRange(t)
	out := make([]Piece, 0, len(ranges))
	for _, r := range ranges {
		out = append(out, Piece{Blob: blob, Off: int64(base + r.Off), Len: int64(r.Len)})
	}
	return out
}
