package sharedfill

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Security review: a chunk object was its bytes and their sha256, which
// anyone who can write the store (the bucket's credentials, the RWX volume)
// can compute. Planted at a cached file's chunk key, EVIL… and its sha256
// were served by every node to range and tensor readers. Chunks are now
// sealed under the cluster's secret: whatever a store writer puts, no node
// serves it; it is deleted and the chunk fetched anew from upstream.
func TestForgedChunkNeverServed(t *testing.T) {
	evil := bytes.Repeat([]byte("EVIL"), testChunk/4)
	evilSum := sha256.Sum256(evil)
	for _, tc := range []struct {
		name   string
		forge  func(genuine []byte) []byte
		reason string
	}{
		// Exactly what passed before: the bytes, then their sha256.
		{"bytes and their sha256", func([]byte) []byte {
			return append(bytes.Clone(evil), evilSum[:]...)
		}, RejectSize},
		// The size of a sealed object, naming the cluster's secret id
		// (it is in every object), with the best tag a writer without
		// the secret has.
		{"sealed-looking", func(genuine []byte) []byte {
			obj := append(bytes.Clone(evil), genuine[testChunk:testChunk+secretIDLen]...)
			return append(obj, evilSum[:]...)
		}, RejectMAC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := fileStore(t)
			data := randomData(20, 3*testChunk)
			etag := etagOf(20)
			first := newSharer(t, store, nil, Options{})
			read(t, first.Origin(etag, int64(len(data)), &upstream{data: data}), 0, int64(len(data)))
			first.wg.Wait()
			key := first.chunkKey(chunkID{etag, 1})
			genuine := readObj(t, store, key)
			if err := store.Put(context.Background(), key, tc.forge(genuine)); err != nil {
				t.Fatal(err)
			}

			var rejected claims
			up := &upstream{data: data}
			second := newSharer(t, store, nil, Options{OnReject: rejected.add, Logger: testLogger(t)})
			o := second.Origin(etag, int64(len(data)), up)
			for _, r := range [][2]int64{{testChunk + 90, 20}, {testChunk + 4000, 100}, {0, int64(len(data))}} {
				if got := read(t, o, r[0], r[1]); !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
					t.Fatalf("bytes %d+%d: the forged chunk's bytes were served", r[0], r[1])
				}
			}
			if n := rejected.get(tc.reason); n != 1 {
				t.Errorf("rejections %v, want one for %q", rejected.n, tc.reason)
			}
			if n := up.bytes.Load(); n != testChunk {
				t.Errorf("fetched %d bytes upstream, want the one chunk (%d) fetched anew", n, testChunk)
			}
			second.wg.Wait()
			if got := readObj(t, store, key); !bytes.Equal(got, genuine) {
				t.Error("the forged object was not replaced by the chunk as fetched")
			}
		})
	}
}

// An object that is genuine, but of another chunk (another index of the
// file, or the same index of another file), is no good at this chunk's key:
// a store writer could otherwise serve any bytes the cluster ever fetched
// in place of any others, with their seal intact.
func TestCopiedChunkRejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		from func(s *Sharer, etagA, etagB string) string // the key copied
	}{
		{"another index", func(s *Sharer, a, _ string) string { return s.chunkKey(chunkID{a, 0}) }},
		{"another file", func(s *Sharer, _, b string) string { return s.chunkKey(chunkID{b, 1}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := fileStore(t)
			dataA, dataB := randomData(21, 3*testChunk), randomData(22, 3*testChunk)
			etagA, etagB := etagOf(21), etagOf(22)
			first := newSharer(t, store, nil, Options{})
			read(t, first.Origin(etagA, int64(len(dataA)), &upstream{data: dataA}), 0, int64(len(dataA)))
			read(t, first.Origin(etagB, int64(len(dataB)), &upstream{data: dataB}), 0, int64(len(dataB)))
			first.wg.Wait()
			key := first.chunkKey(chunkID{etagA, 1})
			genuine := readObj(t, store, key)
			if err := store.Put(context.Background(), key, readObj(t, store, tc.from(first, etagA, etagB))); err != nil {
				t.Fatal(err)
			}

			var rejected claims
			up := &upstream{data: dataA}
			second := newSharer(t, store, nil, Options{OnReject: rejected.add})
			from := int64(testChunk + 512)
			if got := read(t, second.Origin(etagA, int64(len(dataA)), up), from, 1000); !bytes.Equal(got, dataA[from:from+1000]) {
				t.Fatal("the copied chunk's bytes were served")
			}
			if rejected.get(RejectMAC) != 1 || up.bytes.Load() != testChunk {
				t.Errorf("rejections %v, %d bytes upstream; want one mac rejection and the chunk fetched anew", rejected.n, up.bytes.Load())
			}
			second.wg.Wait()
			if got := readObj(t, store, key); !bytes.Equal(got, genuine) {
				t.Error("the copied object was not replaced by the chunk as fetched")
			}
		})
	}
}

// A node given another secret than the cluster's sees every chunk as
// forged: it serves none of them, fetches them upstream, and says once,
// plainly, that its secret is probably the odd one out.
func TestOtherSecretRejected(t *testing.T) {
	store := fileStore(t)
	data := randomData(23, 3*testChunk)
	etag := etagOf(23)
	first := newSharer(t, store, nil, Options{})
	read(t, first.Origin(etag, int64(len(data)), &upstream{data: data}), 0, int64(len(data)))
	first.wg.Wait()

	other := []byte("another-secret-of-at-least-32-bytes!!")
	var rejected claims
	logs := &recorder{}
	up := &upstream{data: data}
	odd := newSharer(t, store, nil, Options{Secret: other, OnReject: rejected.add, Logger: slog.New(logs)})
	if got := read(t, odd.Origin(etag, int64(len(data)), up), 0, int64(len(data))); !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	if rejected.get(RejectOtherSecret) != 3 || up.bytes.Load() != int64(len(data)) {
		t.Errorf("rejections %v, %d bytes upstream; want all 3 chunks rejected as another secret's and fetched anew", rejected.n, up.bytes.Load())
	}
	if n := logs.count("chunks in the store are sealed under a different secret"); n != 1 {
		t.Errorf("the hint about a differing secret was logged %d times, want once", n)
	}
	odd.wg.Wait()

	// What the odd node put, the others reject in turn.
	var back claims
	up2 := &upstream{data: data}
	third := newSharer(t, store, nil, Options{OnReject: back.add})
	if got := read(t, third.Origin(etag, int64(len(data)), up2), 10, 100); !bytes.Equal(got, data[10:110]) {
		t.Fatal("bytes differ")
	}
	if back.get(RejectOtherSecret) != 1 || up2.bytes.Load() != testChunk {
		t.Errorf("rejections %v, %d bytes upstream; want the odd node's chunk rejected and fetched anew", back.n, up2.bytes.Load())
	}
}

func TestSecretTooShortRefused(t *testing.T) {
	for _, secret := range [][]byte{nil, []byte("short"), bytes.Repeat([]byte{'k'}, MinSecretLen-1)} {
		if _, err := New(fileStore(t), Options{Secret: secret}); err == nil {
			t.Errorf("a %d-byte secret was accepted", len(secret))
		}
	}
	if SecretID([]byte(testSecret)) == SecretID([]byte(testSecret+"x")) {
		t.Error("two secrets have one id")
	}
}

// recorder is a slog.Handler keeping every message.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) count(substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(slices.DeleteFunc(slices.Clone(r.msgs), func(m string) bool { return !strings.Contains(m, substr) }))
}
