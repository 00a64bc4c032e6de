package sharedfill

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/testutil"
)

// Review (issue 21): every cache fill that reached the store read the
// whole chunk object, to hand on a few bytes of it.

// stored puts a file of n bytes in a fresh store through a node of its own,
// and returns the store (counting chunk GETs) and the file.
func stored(t *testing.T, seed uint64, n int) (*faulty, []byte, string) {
	t.Helper()
	store := &faulty{Objects: fileStore(t)}
	data := randomData(seed, n)
	etag := etagOf(int(seed))
	first := newSharer(t, store, nil, Options{})
	read(t, first.Origin(etag, int64(len(data)), &upstream{data: data}), 0, int64(len(data)))
	first.wg.Wait() // every chunk put
	store.gets.Store(0)
	return store, data, etag
}

// 64 sequential 1 KiB reads inside one stored chunk read it from the store
// once (they read it 64 times).
func TestSmallReadsOfAChunkOneGet(t *testing.T) {
	store, data, etag := stored(t, 30, 3*testChunk)
	up := &upstream{data: data}
	var got claims
	s := newSharer(t, store, nil, Options{OnVerified: got.add})
	o := s.Origin(etag, int64(len(data)), up)
	const piece = testChunk / 64
	for off := int64(testChunk); off < 2*testChunk; off += piece {
		if b := read(t, o, off, piece); !bytes.Equal(b, data[off:off+piece]) {
			t.Fatalf("bytes at %d differ", off)
		}
	}
	if n := store.gets.Load(); n != 1 {
		t.Errorf("%d store GETs for 64 reads in one chunk, want 1", n)
	}
	if up.requests.Load() != 0 {
		t.Errorf("%d upstream requests for stored chunks", up.requests.Load())
	}
	if got.get(VerifiedMiss) != 1 || got.get(VerifiedHit) != 63 {
		t.Errorf("look-ups %v, want 1 miss and 63 hits", got.n)
	}
}

// A fresh node reading a whole stored file in fills of chunk size that do
// not line up with the chunks, as the cache's do, reads each chunk from the
// store once (it read nearly every chunk twice: 120 GETs for 64 chunks).
func TestFreshNodeReadsEachChunkOnce(t *testing.T) {
	const chunks = 9 // the last one short
	store, data, etag := stored(t, 31, (chunks-1)*testChunk+777)
	s := newSharer(t, store, nil, Options{})
	o := s.Origin(etag, int64(len(data)), &upstream{data: data})
	for off := int64(0); off < int64(len(data)); {
		end := min(off+testChunk, int64(len(data)))
		if off == 0 {
			end = 4096 // skews every later fill off the chunk boundaries
		}
		if b := read(t, o, off, end-off); !bytes.Equal(b, data[off:end]) {
			t.Fatalf("bytes at %d differ", off)
		}
		off = end
	}
	if n := store.gets.Load(); n != chunks {
		t.Errorf("%d store GETs for a %d-chunk file, want %d", n, chunks, chunks)
	}
}

// The node that fetched a chunk from upstream keeps it: its fills after the
// flight ended read neither the store nor upstream again.
func TestFetcherKeepsWhatItFetched(t *testing.T) {
	store := &faulty{Objects: fileStore(t)}
	data := randomData(32, 2*testChunk)
	up := &upstream{data: data}
	s := newSharer(t, store, nil, Options{})
	o := s.Origin(etagOf(32), int64(len(data)), up)
	const piece = testChunk / 16
	if b := read(t, o, 0, piece); !bytes.Equal(b, data[:piece]) {
		t.Fatal("bytes differ")
	}
	s.wg.Wait() // the flight is over: later reads would go to the store
	for off := int64(piece); off < testChunk; off += piece {
		if b := read(t, o, off, piece); !bytes.Equal(b, data[off:off+piece]) {
			t.Fatalf("bytes at %d differ", off)
		}
	}
	if n := store.gets.Load(); n != 1 {
		t.Errorf("%d store GETs, want 1 (the one that found the chunk missing)", n)
	}
	if up.bytes.Load() != testChunk {
		t.Errorf("upstream sent %d bytes, want the one chunk", up.bytes.Load())
	}
}

// gated holds GETs of chunk objects until open is closed.
type gated struct {
	Objects
	open    chan struct{}
	blocked atomic.Int64 // GETs that reached the gate
}

func (g *gated) ReadRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, int64, error) {
	if isKind(key, kindChunk) {
		g.blocked.Add(1)
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	return g.Objects.ReadRange(ctx, key, off, n)
}

// Readers of one chunk at once share one GET of it.
func TestConcurrentReadersOneGet(t *testing.T) {
	store, data, etag := stored(t, 33, 2*testChunk)
	g := &gated{Objects: store, open: make(chan struct{})}
	s := newSharer(t, g, nil, Options{})
	o := s.Origin(etag, int64(len(data)), &upstream{data: data})
	const readers = 8
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() {
			off := int64(testChunk + i*1000)
			if b := read(t, o, off, 500); !bytes.Equal(b, data[off:off+500]) {
				t.Errorf("reader %d: bytes differ", i)
			}
		})
	}
	key := s.readKey(verifiedKey{id: chunkID{etag, 1}, size: testChunk})
	// Each reader either waits on the read or, were reads not shared,
	// holds a GET of its own.
	testutil.Eventually(t, 10*time.Second, "every reader waiting on the chunk's read", func() bool {
		return s.reads.Waiting(key) == readers || g.blocked.Load() == readers
	})
	close(g.open)
	wg.Wait()
	if n := store.gets.Load(); n != 1 {
		t.Errorf("%d store GETs for %d readers of one chunk, want 1", n, readers)
	}
}

// A reader that gives up waiting for a chunk's read gets its own error; the
// read goes on for the others.
func TestWaiterLeavingKeepsTheRead(t *testing.T) {
	store, data, etag := stored(t, 34, 2*testChunk)
	g := &gated{Objects: store, open: make(chan struct{})}
	s := newSharer(t, g, nil, Options{})
	up := &upstream{data: data}
	o := s.Origin(etag, int64(len(data)), up)
	key := s.readKey(verifiedKey{id: chunkID{etag, 0}, size: testChunk})

	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { // the first: it starts the read
		body, err := o.FetchRange(ctx, 0, 100)
		if err == nil {
			body.Close()
		}
		gaveUp <- err
	}()
	testutil.Eventually(t, 10*time.Second, "the first reader waiting", func() bool { return g.blocked.Load() == 1 })
	other := make(chan []byte, 1)
	go func() { other <- read(t, o, 200, 300) }()
	testutil.Eventually(t, 10*time.Second, "both readers waiting", func() bool {
		return s.reads.Waiting(key) == 2 || g.blocked.Load() == 2 // the latter: were reads not shared
	})
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the reader that left got %v, want its context's error", err)
	}
	close(g.open)
	if b := <-other; !bytes.Equal(b, data[200:500]) {
		t.Fatal("the reader that stayed got other bytes")
	}
	if n := store.gets.Load(); n != 1 {
		t.Errorf("%d store GETs, want the one read both waited on", n)
	}
	if up.requests.Load() != 0 {
		t.Errorf("%d upstream requests: the read was not kept for the reader that stayed", up.requests.Load())
	}
}

// A forged chunk is rejected once, never kept, and the chunk as fetched
// anew is what later reads get, from memory.
func TestRejectedChunkNotKept(t *testing.T) {
	store, data, etag := stored(t, 35, 3*testChunk)
	var rejected claims
	up := &upstream{data: data}
	s := newSharer(t, store, nil, Options{OnReject: rejected.add})
	key := s.chunkKey(chunkID{etag, 1})
	genuine := readObj(t, store, key)
	forged := bytes.Clone(genuine)
	forged[7] ^= 0x55
	if err := store.Put(context.Background(), key, forged); err != nil {
		t.Fatal(err)
	}
	o := s.Origin(etag, int64(len(data)), up)
	for i := range 8 {
		off := int64(testChunk + i*100)
		if b := read(t, o, off, 50); !bytes.Equal(b, data[off:off+50]) {
			t.Fatalf("read %d: the forged chunk's bytes were served", i)
		}
	}
	if rejected.get(RejectMAC) != 1 || up.bytes.Load() != testChunk {
		t.Errorf("rejections %v, %d bytes upstream; want one rejection and the chunk fetched anew once", rejected.n, up.bytes.Load())
	}
	s.wg.Wait() // the flight keeps the chunk once its fetch is whole, after readers had their bytes
	kept, ok := s.verified.get(verifiedKey{id: chunkID{etag, 1}, size: testChunk})
	if !ok || !bytes.Equal(kept, data[testChunk:2*testChunk]) {
		t.Errorf("kept in memory: %v, the genuine chunk: %v", ok, bytes.Equal(kept, data[testChunk:2*testChunk]))
	}
}

// wrongFirst is an upstream that sends wrong bytes until fixed.
type wrongFirst struct {
	upstream
	mu    sync.Mutex
	fixed bool
}

func (u *wrongFirst) FetchRange(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	u.mu.Lock()
	fixed := u.fixed
	u.mu.Unlock()
	if fixed {
		return u.upstream.FetchRange(ctx, off, n)
	}
	return io.NopCloser(bytes.NewReader(bytes.Repeat([]byte{'x'}, int(n)))), nil
}

// When the cache finds a file's hash wrong it discards the file's chunks:
// any of them may be what was wrong, and a chunk held in memory must not
// be served afterwards either.
func TestDiscardDropsKeptChunks(t *testing.T) {
	store := &faulty{Objects: fileStore(t)}
	data := randomData(36, 2*testChunk)
	up := &wrongFirst{upstream: upstream{data: data}}
	s := newSharer(t, store, nil, Options{})
	o := s.Origin(etagOf(36), int64(len(data)), up)
	if b := read(t, o, 0, int64(len(data))); bytes.Equal(b, data) {
		t.Fatal("the wrong upstream sent the right bytes")
	}
	s.wg.Wait()
	if s.verified.held() != int64(len(data)) {
		t.Fatalf("%d bytes kept, want the file's %d", s.verified.held(), len(data))
	}
	up.mu.Lock()
	up.fixed = true
	up.mu.Unlock()
	s.Discard(etagOf(36))
	if n := s.verified.held(); n != 0 {
		t.Errorf("%d bytes still kept after Discard", n)
	}
	s.wg.Wait() // the store's copies are gone too
	if b := read(t, o, 100, 1000); !bytes.Equal(b, data[100:1100]) {
		t.Fatal("a discarded chunk was served")
	}
}

// A read that was under way when its file was discarded keeps nothing:
// what it read may be what the discard was for.
func TestReadDuringDiscardKeepsNothing(t *testing.T) {
	store, data, etag := stored(t, 37, testChunk)
	g := &gated{Objects: store, open: make(chan struct{})}
	s := newSharer(t, g, nil, Options{})
	o := s.Origin(etag, int64(len(data)), &upstream{data: data})
	done := make(chan []byte, 1)
	go func() { done <- read(t, o, 0, 100) }()
	k := verifiedKey{id: chunkID{etag, 0}, size: testChunk}
	testutil.Eventually(t, 10*time.Second, "the read under way", func() bool { return g.blocked.Load() == 1 })
	s.verified.drop(etag) // what Discard and Forget do first
	close(g.open)
	<-done
	if _, ok := s.verified.get(k); ok {
		t.Error("a read under way when its file was dropped kept the chunk")
	}
}

// However many chunks pass through, memory holds at most the bound.
func TestKeptBytesWithinBound(t *testing.T) {
	const chunks = 24
	store, data, etag := stored(t, 38, (chunks-1)*testChunk+1234)
	const bound = 3*testChunk + 5000 // not a whole number of chunks
	s := newSharer(t, store, nil, Options{VerifiedChunkBytes: bound})
	o := s.Origin(etag, int64(len(data)), &upstream{data: data})
	// A second file on the same node, fetched from upstream by it.
	other := randomData(39, 5*testChunk)
	o2 := s.Origin(etagOf(39), int64(len(other)), &upstream{data: other})
	r := rand.New(rand.NewPCG(38, 38))
	var peak int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for range 40 {
				mu.Lock()
				off, n := r.Int64N(int64(len(data))-2000), 1+r.Int64N(2000)
				off2 := r.Int64N(int64(len(other)) - 100)
				mu.Unlock()
				if b := read(t, o, off, n); !bytes.Equal(b, data[off:off+n]) {
					t.Errorf("worker %d: bytes at %d differ", w, off)
					return
				}
				if b := read(t, o2, off2, 100); !bytes.Equal(b, other[off2:off2+100]) {
					t.Errorf("worker %d: bytes of the other file at %d differ", w, off2)
					return
				}
				mu.Lock()
				peak = max(peak, s.verified.held())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if peak > bound {
		t.Errorf("held %d bytes at the peak, bound %d", peak, bound)
	}
	if peak < 3*testChunk {
		t.Errorf("held at most %d bytes: the chunks were not kept up to the bound", peak)
	}
	// And with none kept, nothing is.
	off := newSharer(t, store, nil, Options{VerifiedChunkBytes: -1})
	read(t, off.Origin(etag, int64(len(data)), &upstream{data: data}), 0, int64(len(data)))
	if off.verified.held() != 0 {
		t.Errorf("VerifiedChunkBytes < 0 kept %d bytes", off.verified.held())
	}
}
