package cache

import (
	"context"
	"errors"
	"os"
	"testing"
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
