package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// bypassReader reads a file through the cache and, when the cache cannot
// store what it fetches (a full disk, a quota, an I/O error), carries on
// straight from upstream for the rest of the request: the client is served,
// the error is logged and counted once, and nothing already cached is touched.
// Bytes from upstream are checked by the upstream client as any fill's are.
//
// A whole download keeps its promise even then: the cache would have
// verified the file before its last bytes went out, so once bypassing, the
// reader hashes everything the client got (the cached prefix, read back,
// then the stream) and fails the last read if the hash is not the ETag, so a
// corrupt or mixed body never completes as a 200.
//
// It is used by one request at a time (http.ServeContent reads sequentially).
type bypassReader struct {
	ctx    context.Context
	h      io.ReaderAt
	origin cache.Origin
	end    int64 // end of the window the request reads; the stream stops there
	onFail func(error)
	// tally, when set, counts the bytes streamed from upstream.
	tally *cache.Tally
	// discard, when set, is told that a whole download failed its hash, so
	// the cache drops the partial whose bytes were part of it.
	discard func(error)
	// whole is set (by verifyWhole) for a request of the entire file; etag
	// and size then say what it must hash to.
	whole bool
	etag  string
	size  int64

	bypassing bool          // the cache failed to store: the rest comes from upstream
	body      io.ReadCloser // the upstream stream while bypassing
	pos       int64         // file offset body is at
	sum       hash.Hash     // hash of bytes [0, hashed) served so far, once bypassing a whole download
	hashed    int64
}

func (b *bypassReader) ReadAt(p []byte, off int64) (int, error) {
	if !b.bypassing {
		n, err := b.h.ReadAt(p, off)
		var se *cache.StorageError
		if err == nil || !errors.As(err, &se) {
			return n, err
		}
		b.bypassing = true
		b.onFail(err)
		if err := b.startVerify(off); err != nil {
			return 0, err
		}
		m, err := b.readUpstream(p[n:], off+int64(n))
		return b.verified(p[:n+m], off, err)
	}
	n, err := b.readUpstream(p, off)
	return b.verified(p[:n], off, err)
}

// verifyWhole turns verification on for a whole download of the file, to
// start with the next read at offset 0. Reads before it (the first-byte
// probe) are not hashed; if they already turned to upstream, hashing starts
// from the beginning, which the response reads next.
func (b *bypassReader) verifyWhole(etag string, size int64) {
	b.whole, b.etag, b.size = true, etag, size
	if b.bypassing {
		b.sum, b.hashed = hub.NewHash(hub.ETagKind(etag), size), 0
	}
}

// startVerify begins hashing a whole download that turns to upstream at off:
// the bytes before off, which the client already has, are read back from the
// cache (they are present: they were just served from it).
func (b *bypassReader) startVerify(off int64) error {
	if !b.whole {
		return nil
	}
	b.sum = hub.NewHash(hub.ETagKind(b.etag), b.size)
	if _, err := io.Copy(b.sum, io.NewSectionReader(b.h, 0, off)); err != nil {
		return fmt.Errorf("re-reading the cached start of a file to verify it: %w", err)
	}
	b.hashed = off
	return nil
}

// verified hashes p, read at off, and checks the whole file's hash when p
// completes it; a mismatch replaces the read with a *cache.VerifyError, so
// the response is aborted before its last bytes go out.
func (b *bypassReader) verified(p []byte, off int64, err error) (int, error) {
	if b.sum == nil || len(p) == 0 {
		return len(p), err
	}
	if off != b.hashed {
		// Not sequential (never for a whole download served by
		// http.ServeContent): the hash cannot cover it, so refuse.
		return 0, fmt.Errorf("bypass: read at %d, %d bytes verified", off, b.hashed)
	}
	b.sum.Write(p)
	b.hashed += int64(len(p))
	if b.hashed == b.size {
		if got := hex.EncodeToString(b.sum.Sum(nil)); got != b.etag {
			verr := &cache.VerifyError{ETag: b.etag, Got: got}
			if b.discard != nil {
				b.discard(verr) // the cached part may be what was wrong
			}
			return 0, verr
		}
	}
	return len(p), err
}

// readUpstream reads from one upstream stream of [off, end), reopening it
// only when the reader jumps.
func (b *bypassReader) readUpstream(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.body != nil && b.pos != off {
		b.body.Close()
		b.body = nil
	}
	end := max(b.end, off+int64(len(p)))
	if b.body == nil {
		body, err := b.origin.FetchRange(b.ctx, off, end-off)
		if err != nil {
			return 0, err
		}
		b.body, b.pos = body, off
	}
	n, err := io.ReadFull(b.body, p)
	b.pos += int64(n)
	b.tally.Add(int64(n))
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		// The stream ended where the window does; a later read reopens.
		b.body.Close()
		b.body = nil
		if n == len(p) {
			err = nil
		}
	}
	return n, err
}

// Close releases the upstream stream, if any.
func (b *bypassReader) Close() error {
	if b.body != nil {
		return b.body.Close()
	}
	return nil
}
