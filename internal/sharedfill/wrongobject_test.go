package sharedfill

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// Found by the soak (make soak): a chunk object changed in the store, same
// size, other bytes, was handed to range readers on every node, since only
// the whole file's hash was ever checked and a range reader never waits for
// it. Whatever a node put, changed by a tool or a node writing garbage, must
// never reach a reader: it is caught and the chunk fetched anew.
func TestTamperedChunkNeverServed(t *testing.T) {
	store := fileStore(t)
	data := randomData(8, 3*testChunk)
	etag := etagOf(8)
	first := newSharer(t, store, nil, Options{})
	if got := read(t, first.Origin(etag, int64(len(data)), &upstream{data: data}), 0, int64(len(data))); !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	first.wg.Wait() // every chunk put
	key := first.chunkKey(chunkID{etag, 1})
	obj := readObj(t, store, key)
	bad := bytes.Clone(obj)
	bad[100] ^= 0xff // within the chunk's bytes, which come first
	if err := store.Put(context.Background(), key, bad); err != nil {
		t.Fatal(err)
	}

	// Another node reads a few bytes of that chunk, the changed one among
	// them, and then a few others: upstream's bytes both times.
	up := &upstream{data: data}
	second := newSharer(t, store, nil, Options{Logger: testLogger(t)})
	o := second.Origin(etag, int64(len(data)), up)
	for _, r := range [][2]int64{{testChunk + 90, 20}, {testChunk + 4000, 100}} {
		if got := read(t, o, r[0], r[1]); !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
			t.Fatalf("bytes %d+%d: the changed chunk's bytes were served", r[0], r[1])
		}
	}
	if n := up.bytes.Load(); n != testChunk {
		t.Errorf("fetched %d bytes upstream, want the one chunk (%d) fetched anew", n, testChunk)
	}
	second.wg.Wait()
	if got := readObj(t, store, key); !bytes.Equal(got, obj) {
		t.Error("the changed object was not replaced by the chunk as fetched")
	}
	if !second.Health().Up {
		t.Errorf("a wrong object counted as the store failing: %+v", second.Health())
	}
}

// Found by the soak: MinIO answers a GET of an object whose bytes rotted on
// its disk with 503 (its checksums catch it) while HEAD still answers. The
// node counted that as the store failing: its breaker opened, every node
// that read the chunk went around the store for a while, again at each
// read, and the object was never repaired. An object the store keeps
// failing to return, while it answers for it, is dropped and fetched anew.
func TestUnreadableChunkReplaced(t *testing.T) {
	base := fileStore(t)
	data := randomData(9, 2*testChunk)
	etag := etagOf(9)
	first := newSharer(t, base, nil, Options{})
	read(t, first.Origin(etag, int64(len(data)), &upstream{data: data}), 0, int64(len(data)))
	first.wg.Wait()
	key := first.chunkKey(chunkID{etag, 0})
	store := &rotten{Objects: base, key: key}

	up := &upstream{data: data}
	s := newSharer(t, store, nil, Options{Logger: testLogger(t)})
	o := s.Origin(etag, int64(len(data)), up)
	if got := read(t, o, 10, 1000); !bytes.Equal(got, data[10:1010]) {
		t.Fatal("bytes differ")
	}
	if h := s.Health(); !h.Up {
		t.Fatalf("one rotten object took the whole store out: %+v", h)
	}
	s.wg.Wait()
	if store.rewritten() != 1 {
		t.Fatalf("the rotten object was put anew %d times, want once", store.rewritten())
	}
	// Repaired: the next node reads it from the store.
	up2 := &upstream{data: data}
	third := newSharer(t, store, nil, Options{})
	if got := read(t, third.Origin(etag, int64(len(data)), up2), 0, testChunk); !bytes.Equal(got, data[:testChunk]) {
		t.Fatal("bytes differ after the repair")
	}
	if n := up2.bytes.Load(); n != 0 {
		t.Errorf("%d bytes fetched upstream after the repair, want none", n)
	}
}

// A blip (one failed read of an object that reads fine the next time) is
// neither a failing store nor a wrong object: the chunk stays.
func TestReadBlipKeepsChunk(t *testing.T) {
	base := fileStore(t)
	data := randomData(10, testChunk)
	etag := etagOf(10)
	first := newSharer(t, base, nil, Options{})
	read(t, first.Origin(etag, int64(len(data)), &upstream{data: data}), 0, int64(len(data)))
	first.wg.Wait()
	key := first.chunkKey(chunkID{etag, 0})
	store := &rotten{Objects: base, key: key, failures: 1}
	up := &upstream{data: data}
	s := newSharer(t, store, nil, Options{})
	if got := read(t, s.Origin(etag, int64(len(data)), up), 0, 100); !bytes.Equal(got, data[:100]) {
		t.Fatal("bytes differ")
	}
	if up.bytes.Load() != 0 || store.rewritten() != 0 || !s.Health().Up {
		t.Errorf("after one failed read: %d bytes upstream, %d puts, health %+v; want the chunk read again from the store",
			up.bytes.Load(), store.rewritten(), s.Health())
	}
}

func readObj(t *testing.T, store Objects, key string) []byte {
	t.Helper()
	body, _, err := store.ReadRange(context.Background(), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rotten is a store on which reads of one object fail, as MinIO's do for an
// object whose bytes rotted on disk, while everything else about it works,
// until the object is written anew; with failures set, only that many
// reads fail.
type rotten struct {
	Objects
	key      string
	failures int

	mu     sync.Mutex
	reads  int
	writes int
}

func (r *rotten) ReadRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, int64, error) {
	r.mu.Lock()
	bad := key == r.key && r.writes == 0 && (r.failures == 0 || r.reads < r.failures)
	if key == r.key {
		r.reads++
	}
	r.mu.Unlock()
	if bad {
		return nil, 0, errors.New("api error SlowDownRead: Resource requested is unreadable (test)")
	}
	return r.Objects.ReadRange(ctx, key, off, n)
}

func (r *rotten) Create(ctx context.Context, key string, data []byte) error {
	err := r.Objects.Create(ctx, key, data)
	if err == nil && key == r.key {
		r.mu.Lock()
		r.writes++
		r.mu.Unlock()
	}
	return err
}

func (r *rotten) rewritten() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

// Found by the soak: a file that failed verification while the store was
// cut off kept its chunks in the store (the one attempt to drop them
// failed), so the next node to read it whole failed too, and range readers
// got its bytes. The drop is tried again until the store answers.
func TestDiscardOutlastsStoreOutage(t *testing.T) {
	store := &faulty{Objects: fileStore(t)}
	data := randomData(11, 3*testChunk)
	etag := etagOf(11)
	s := newSharer(t, store, nil, Options{Logger: testLogger(t)})
	read(t, s.Origin(etag, int64(len(data)), &upstream{data: data}), 0, int64(len(data)))
	s.wg.Wait()
	stored := func() int {
		n := 0
		_ = store.Objects.List(context.Background(), layoutPrefix, func(o sharedstore.Object) error {
			if k, ok := parseKey(o.Key); ok && k.kind == kindChunk && k.etag == etag {
				n++
			}
			return nil
		})
		return n
	}
	if stored() != 3 {
		t.Fatalf("%d chunks stored, want 3", stored())
	}
	store.down.Store(true)
	s.Discard(etag)
	testutil.Eventually(t, 10*time.Second, "the first attempt to drop the chunks to fail", func() bool { return store.refused.Load() > 0 })
	store.down.Store(false)
	testutil.Eventually(t, 10*time.Second, "the chunks of a file that failed verification to leave the store once it came back",
		func() bool { return stored() == 0 })
}
