package repofs

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// File is one opened repo file: an io.ReaderAt whose reads come from the
// cache (waiting for its fills) or, once the cache cannot store the file,
// straight from upstream for the rest of the File's life. It belongs to one
// request. ReadAt is safe for concurrent use; reads that go to upstream are
// serialised on one stream, which suits a sequential reader (as
// http.ServeContent is) and stays correct, if slower, for others.
type File struct {
	Repo hub.Repo
	Path string
	Meta resolver.Meta

	fs     *FS
	ctx    context.Context // the request's: bounds waits and upstream reads
	h      *cache.Handle   // nil for a file the cache cannot hold at all
	origin *origin

	bypassing atomic.Bool // the cache cannot store this file: reads go upstream

	mu     sync.Mutex // serialises upstream reads; guards the fields below
	stream stream
	// around is what reads that bypass the cache read from, set when the
	// bypass begins: for a cache that cannot store (a full disk) the
	// cluster's store first (fillOrigin), so a node whose disk is smaller
	// than the model does not cost the cluster a copy of it from upstream;
	// for another caller's refusal the caller's own upstream (othersRefusal).
	// nil: the caller's own upstream.
	around cache.Origin
	// whole is set by VerifyWhole: the reader reads the entire file from 0,
	// so once bypassing, everything it is given is hashed and checked.
	whole  bool
	sum    hash.Hash
	hashed int64
}

var _ io.ReaderAt = (*File)(nil)

// Size is the file's size in bytes.
func (f *File) Size() int64 { return f.Meta.Size }

// Expect says [off, end) will be read next, sequentially: the cache reads
// ahead inside it, and an upstream stream asks for all of it at once.
func (f *File) Expect(off, end int64) {
	if f.h != nil {
		f.h.Expect(off, end)
	}
	f.mu.Lock()
	f.stream.end = min(max(end, off), f.Meta.Size)
	f.mu.Unlock()
}

// Complete reports whether the file is a verified blob in the cache: reads
// are plain preads of it, never waiting, never going upstream.
func (f *File) Complete() bool { return f.h != nil && f.h.Complete() }

// Bypassed reports whether reads went (or go) straight to upstream.
func (f *File) Bypassed() bool { return f.bypassing.Load() }

// Present reports how many bytes of [off, end) the cache already holds.
func (f *File) Present(off, end int64) int64 {
	if f.h == nil {
		return 0
	}
	return f.h.Present(off, end)
}

// Blob returns a new descriptor on the verified blob, for zero-copy
// serving, or cache.ErrNotCached while the file is not one.
func (f *File) Blob() (*os.File, error) {
	if f.h == nil {
		return nil, cache.ErrNotCached
	}
	return f.h.OpenBlob()
}

// VerifyWhole tells the File its reader will read the whole file, from
// offset 0 on, the next read included. The cache verifies such a read
// itself; should it turn to upstream part-way (a full disk), the File
// hashes everything the reader got and fails the read that completes the
// file if the hash is not the ETag, so a corrupt or mixed body never
// completes as a success.
func (f *File) VerifyWhole() {
	kind := hub.ETagKind(f.Meta.ETag)
	if kind == hub.HashUnknown {
		return // nothing to check against
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.whole = true
	if f.bypassing.Load() {
		f.sum, f.hashed = hub.NewHash(kind, f.Meta.Size), 0
	}
}

// Begin prepares serving [off, end) next, sequentially (whole: the entire
// file, from 0): the cache reads ahead inside it, a whole read is verified
// even should it turn to upstream part-way (VerifyWhole), and the first
// byte is read now, so that an upstream failing outright is an error before
// anything is sent. That costs nothing: its block is needed first.
func (f *File) Begin(off, end int64, whole bool) error {
	f.Expect(off, end)
	if end > off {
		var first [1]byte
		if _, err := f.ReadAt(first[:], off); err != nil && err != io.EOF {
			return err
		}
	}
	if whole {
		f.VerifyWhole()
	}
	return nil
}

// othersRetries is how often a read that met another caller's refusal is
// retried through the cache before it turns to upstream for good.
const othersRetries = 2

// ReadAt reads len(p) bytes at off.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if !f.bypassing.Load() {
		n, err := f.h.ReadAt(p, off)
		for try := 0; try < othersRetries && f.othersRefusal(err); try++ {
			// The cache forgot the block's failures when it gave up, so
			// this read plans a fill of its own, with this caller's origin.
			n, err = f.h.ReadAt(p, off)
		}
		if err == nil {
			return n, nil // before errors.As, whose target escapes: warm reads allocate nothing here
		}
		var se *cache.StorageError
		storage := errors.As(err, &se)
		if !storage && !f.othersRefusal(err) {
			return n, err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.bypassing.Load() {
			f.bypassing.Store(true)
			if storage {
				f.around = f.fs.fillOrigin(f.origin)
				if f.fs.opts.OnBypass != nil {
					f.fs.opts.OnBypass(f.ctx, f.Repo, f.Path, err)
				}
			}
			if err := f.startVerify(off); err != nil {
				return 0, err
			}
		}
		m, err := f.readUpstream(p[n:], off+int64(n))
		return f.verified(p[:n+m], off, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.readUpstream(p, off)
	return f.verified(p[:n], off, err)
}

// othersRefusal reports whether a cache read failed with upstream refusing
// a caller other than this File's. Fills are shared: the block this read
// waits for may have been fetched, and refused, with another caller's
// credentials (a token that lost access to a repo that turned gated), and
// the cache hands that error to whoever waits once the block's attempts run
// out. That refusal says nothing about this caller, who must get bytes or a
// refusal of its own: so the read is retried, and then served straight from
// upstream with this caller's origin, verified as a bypassed read is.
func (f *File) othersRefusal(err error) bool {
	return errors.Is(err, fetch.ErrRefused) && !f.origin.refused.Load()
}

// startVerify begins hashing a whole read that turns to upstream at off:
// the bytes before off, which the reader already has, are read back from
// the cache (they are present: they were just served from it).
func (f *File) startVerify(off int64) error {
	if !f.whole {
		return nil
	}
	f.sum = hub.NewHash(hub.ETagKind(f.Meta.ETag), f.Meta.Size)
	if _, err := io.Copy(f.sum, io.NewSectionReader(f.h, 0, off)); err != nil {
		return fmt.Errorf("re-reading the cached start of %s to verify it: %w", f.Path, err)
	}
	f.hashed = off
	return nil
}

// verified hashes p, read at off, and checks the whole file's hash when p
// completes it; a mismatch replaces the read with a *cache.VerifyError (and
// drops the partial whose bytes were part of the body).
func (f *File) verified(p []byte, off int64, err error) (int, error) {
	if f.sum == nil || len(p) == 0 {
		return len(p), err
	}
	switch {
	case off+int64(len(p)) <= f.hashed:
		return len(p), err // a re-read of bytes already hashed
	case off > f.hashed:
		// A gap the hash cannot cover (never for a whole read served by
		// http.ServeContent): refuse rather than pass unverified bytes.
		return 0, fmt.Errorf("repofs: read at %d past the %d bytes verified", off, f.hashed)
	}
	f.sum.Write(p[f.hashed-off:])
	f.hashed = off + int64(len(p))
	if f.hashed == f.Meta.Size {
		if got := hex.EncodeToString(f.sum.Sum(nil)); got != f.Meta.ETag {
			verr := &cache.VerifyError{ETag: f.Meta.ETag, Got: got}
			if f.h != nil {
				f.h.Discard(verr) // the cached part may be what was wrong
			}
			return 0, verr
		}
	}
	return len(p), err
}

// Close releases the cache handle and any upstream stream.
func (f *File) Close() error {
	f.mu.Lock()
	err := f.stream.close()
	f.mu.Unlock()
	if f.h != nil {
		err = errors.Join(f.h.Close(), err)
	}
	return err
}
