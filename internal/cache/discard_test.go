package cache

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

// A partial whose bytes a caller found wrong is dropped, so the next Open
// refetches from scratch; a verified blob is never dropped this way.
func TestDiscardDropsOnlyPartials(t *testing.T) {
	s := newStore(t, Options{BlockSize: 4096, ChunkSize: 4096})
	data := genData(64<<10, 3)
	o := &fakeOrigin{data: data}
	f := fileFor("w.bin", data)

	h, err := s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := readSeq(h, 0, 8192, 4096, data); err != nil {
		t.Fatal(err)
	}
	settle(s)
	h.Discard(&VerifyError{ETag: f.ETag, Got: "bad"})
	if _, err := h.ReadAt(make([]byte, 10), 0); !errors.As(err, new(*VerifyError)) {
		t.Errorf("read after Discard: %v, want the VerifyError", err)
	}
	h.Close()
	if _, err := os.Stat(s.paths.partialData(f.Repo, f.ETag)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the partial's data file survived: %v", err)
	}
	before := o.bytes.Load()
	openRead(t, s, f, o)
	settle(s)
	if got := o.bytes.Load() - before; got != int64(len(data)) {
		t.Errorf("refetched %d bytes after Discard, want the whole %d", got, len(data))
	}

	h, err = s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Complete() {
		t.Fatal("the file was not promoted")
	}
	h.Discard(errors.New("caller says wrong"))
	h.Close()
	if _, err := os.Stat(s.paths.blob(f.Repo, f.ETag)); err != nil {
		t.Errorf("Discard removed a verified blob: %v", err)
	}
}

// A request's tally counts the bytes its fills brought from upstream, and
// fill errors reach OnFillError.
func TestTallyAndFillErrors(t *testing.T) {
	var fillErrs []error
	var mu sync.Mutex
	s := newStore(t, Options{BlockSize: 4096, ChunkSize: 16384, OnFillError: func(err error) {
		mu.Lock()
		fillErrs = append(fillErrs, err)
		mu.Unlock()
	}})
	data := genData(64<<10, 4)
	o := &fakeOrigin{data: data}
	var tally Tally
	ctx := WithTally(context.Background(), &tally)
	h, err := s.Open(ctx, fileFor("t.bin", data), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := readSeq(h, 0, 8192, 4096, data); err != nil {
		t.Fatal(err)
	}
	h.Close()
	settle(s)
	if got := tally.Bytes(); got != o.served.Load() || got < 8192 {
		t.Errorf("tally = %d, origin served %d", got, o.served.Load())
	}
	boom := errors.New("upstream 503")
	o2 := &fakeOrigin{data: genData(8192, 5), hook: func(context.Context, int64, int64) error { return boom }}
	h2, err := s.Open(context.Background(), fileFor("u.bin", o2.data), o2)
	if err != nil {
		t.Fatal(err)
	}
	h2.ReadAt(make([]byte, 10), 0)
	h2.Close()
	settle(s)
	mu.Lock()
	defer mu.Unlock()
	if len(fillErrs) == 0 || !errors.Is(fillErrs[0], boom) {
		t.Errorf("OnFillError saw %v", fillErrs)
	}
}

// The running hash follows the fills: by the time the last byte arrives,
// most of the file is already hashed, so the verdict does not wait for a
// pass over the whole file.
func TestRunningHashFollowsFills(t *testing.T) {
	s := newStore(t, Options{BlockSize: 4096, ChunkSize: 16384})
	data := genData(1<<20, 8)
	o := &fakeOrigin{data: data}
	f := fileFor("r.bin", data)
	h, err := s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.Expect(0, f.Size)
	if err := readSeq(h, 0, f.Size/2, 32<<10, data); err != nil {
		t.Fatal(err)
	}
	// Polled: hashing progress does not signal the item's waiters, and
	// the hash lock must not be taken under it.mu, as waitItem would.
	for deadline := time.Now().Add(hangAfter); h.it.hash.done.Load() < f.Size/2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("running hash stuck at %d of %d bytes", h.it.hash.done.Load(), f.Size/2)
		}
	}
	if err := readSeq(h, f.Size/2, f.Size, 32<<10, data); err != nil {
		t.Fatal(err)
	}
	if !h.Complete() {
		t.Fatal("not promoted after a whole read")
	}
}
