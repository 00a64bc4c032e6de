package cache

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
)

// After a crash the sidecar may claim ranges the data file never got; they
// are dropped on Open, and the partial resumes fetching only what is missing.
func TestReloadDropsRangesBeyondData(t *testing.T) {
	const mib = 1 << 20
	data := genData(4*mib, 10)
	o := &fakeOrigin{data: data}
	dir := t.TempDir()
	opts := Options{Dir: dir, ChunkSize: mib}
	s := newStore(t, opts)
	f := fileFor("sub/a.bin", data)
	h, err := s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	h.Expect(0, 2*mib)
	if err := readSeq(h, 0, 2*mib, 32<<10, data); err != nil {
		t.Fatal(err)
	}
	h.Close()
	s.Close()

	// Simulate the crash: the data file lost its tail (mid-block), and the
	// sidecar claims bytes that were never written at all.
	dataPath := s.paths.partialData(testRepo, f.ETag)
	if err := os.Truncate(dataPath, mib+1000); err != nil {
		t.Fatal(err)
	}
	scPath := s.paths.sidecar(testRepo, f.ETag)
	var sc sidecar
	b, err := os.ReadFile(scPath)
	if err == nil {
		err = json.Unmarshal(b, &sc)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.Present.Ranges(); len(got) != 1 || got[0] != (ranges.Range{Pos: 0, End: 2 * mib}) {
		t.Fatalf("saved sidecar present = %v, want [0,2MiB)", got)
	}
	sc.Present.Insert(ranges.Range{Pos: 0, End: 3 * mib})
	b, _ = json.Marshal(sc)
	if err := os.WriteFile(scPath, b, 0o644); err != nil {
		t.Fatal(err)
	}

	s2 := newStore(t, opts)
	if st := s2.Stats(); st.Partials != 1 || st.PartialBytes != mib {
		t.Fatalf("after reload Stats = %+v, want one partial of %d bytes", st, mib)
	}
	if got, complete, err := s2.Stat(testRepo, testCommit, f.Path); err != nil || complete || got.ETag != f.ETag || got.Size != f.Size {
		t.Errorf("Stat of a partial = %+v, %v, %v", got, complete, err)
	}
	before := o.bytes.Load()
	openRead(t, s2, f, o)
	if got := o.bytes.Load() - before; got != f.Size-mib {
		t.Errorf("resume fetched %d bytes, want %d: %v", got, f.Size-mib, o.requested()[2:])
	}
	if st := s2.Stats(); st.Blobs != 1 || st.Partials != 0 {
		t.Errorf("Stats = %+v, want the resumed file promoted", st)
	}
	if _, err := os.Stat(scPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sidecar left after promotion: %v", err)
	}
}

// Sidecars that are malformed, hostile or orphaned are dropped with their
// data; a sidecar left behind by a promotion that completed is removed.
func TestReloadDropsBadState(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, Options{Dir: dir})
	data := genData(300_000, 11)
	f := fileFor("a.bin", data)
	openRead(t, s, f, &fakeOrigin{data: data})
	s.Close()

	p := s.paths
	write := func(name, content string) string {
		t.Helper()
		full := filepath.Join(p.partial(), name)
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return full
	}
	// A stale sidecar (and data) for the file already promoted.
	stale := write(filepath.Base(p.sidecar(testRepo, f.ETag)), `{"version":1,"repo_type":"model","repo_id":"org/model","commit":"`+testCommit+`","path":"a.bin","etag":"`+f.ETag+`","size":300000,"block_size":65536,"present":[{"pos":0,"end":65536}]}`)
	staleData := write(filepath.Base(p.partialData(testRepo, f.ETag)), "x")
	// Garbage, a hostile path, and data with no sidecar.
	other := sha256Hex([]byte("other"))
	garbage := write("models--org--model--"+other+".json", "{not json")
	hostile := write("models--org--x--"+other+".json", `{"version":1,"repo_type":"model","repo_id":"org/x","commit":"`+testCommit+`","path":"../../../etc/passwd","etag":"`+other+`","size":10,"block_size":65536,"present":[{"pos":0,"end":10}]}`)
	orphan := write("models--org--y--"+other, "data")

	s2 := newStore(t, Options{Dir: dir})
	for _, name := range []string{stale, staleData, garbage, hostile, orphan} {
		if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived reload (err %v)", filepath.Base(name), err)
		}
	}
	if st := s2.Stats(); st.Blobs != 1 || st.Partials != 0 || st.BlobBytes != f.Size {
		t.Errorf("Stats = %+v, want just the blob", st)
	}
}

// Open refuses a tree written with another layout version.
func TestLayoutVersionChecked(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, Options{Dir: dir})
	s.Close()
	if err := os.WriteFile(s.paths.version(), []byte("999"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); err == nil {
		t.Fatal("Open accepted layout version 999")
	}
}

// Closing the store aborts a stalled fill without losing the blocks it
// delivered; they are reloaded and not fetched again.
func TestCloseKeepsReceivedBlocks(t *testing.T) {
	data := genData(1<<20, 12)
	gate := make(chan struct{}) // never opened
	o := &fakeOrigin{data: data}
	o.wrap = func(ctx context.Context, off, n int64, body io.Reader) io.Reader {
		return &stallAfter{ctx: ctx, r: body, k: 2 * DefaultBlockSize, gate: gate}
	}
	dir := t.TempDir()
	s := newStore(t, Options{Dir: dir})
	f := fileFor("a.bin", data)
	h, err := s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	h.Expect(0, f.Size)
	if err := readSeq(h, 0, 2*DefaultBlockSize, 32<<10, data); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error)
	go func() {
		_, err := h.ReadAt(make([]byte, 10), 3*DefaultBlockSize)
		waiting <- err
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Errorf("reader waiting across Close got %v, want ErrClosed", err)
	}
	if _, err := h.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadAt after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Open(context.Background(), f, o); !errors.Is(err, ErrClosed) {
		t.Errorf("Open after Close = %v, want ErrClosed", err)
	}
	h.Close()

	o.wrap = nil
	// Every whole block the origin delivered (each response stalls after
	// two) was kept; none is fetched again.
	kept := o.served.Load()
	s2 := newStore(t, Options{Dir: dir})
	if st := s2.Stats(); st.PartialBytes != kept || kept < 2*DefaultBlockSize {
		t.Fatalf("reloaded Stats = %+v, want the %d bytes delivered", st, kept)
	}
	before := o.bytes.Load()
	openRead(t, s2, f, o)
	if got := o.bytes.Load() - before; got != f.Size-kept {
		t.Errorf("resume fetched %d bytes, want %d", got, f.Size-kept)
	}
}

// Offline (nil Origin), a partial serves the bytes it has and reports the
// rest as not cached.
func TestNilOriginServesPresentBytes(t *testing.T) {
	data := genData(1<<20, 13)
	s := newStore(t, Options{})
	f := fileFor("a.bin", data)
	h, err := s.Open(context.Background(), f, &fakeOrigin{data: data})
	if err != nil {
		t.Fatal(err)
	}
	if err := readSeq(h, 0, 1000, 1000, data); err != nil {
		t.Fatal(err)
	}
	h.Close()
	settle(s)

	off, err := s.Open(context.Background(), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if err := readSeq(off, 10, DefaultBlockSize, 5000, data); err != nil {
		t.Error(err)
	}
	if _, err := off.ReadAt(make([]byte, 10), DefaultBlockSize); !errors.Is(err, ErrNotCached) {
		t.Errorf("offline read of missing bytes = %v, want ErrNotCached", err)
	}
}
