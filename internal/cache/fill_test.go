package cache

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
)

// A 1 MiB window in the middle of a cold 200 MB file costs about 1 MiB
// upstream: read-ahead stays inside the Expect window.
func TestWindowInColdFileFetchesOnlyWindow(t *testing.T) {
	const size = 200_000_000
	data := genData(size, 1)
	o := &fakeOrigin{data: data}
	s := newStore(t, Options{})
	h, err := s.Open(context.Background(), fileFor("model.safetensors", data), o)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	off := int64(100_000_003) // not block-aligned
	end := off + 1<<20
	h.Expect(off, end)
	if err := readSeq(h, off, end, 32<<10, data); err != nil {
		t.Fatal(err)
	}
	got, limit := o.bytes.Load(), int64(1<<20+2*DefaultBlockSize)
	t.Logf("1 MiB window of a 200 MB file: %d upstream bytes in %d requests (limit %d)", got, o.requests.Load(), limit)
	if got > limit {
		t.Errorf("upstream bytes = %d, want <= %d; requests %v", got, limit, o.requested())
	}
	if h.Complete() {
		t.Error("Complete() after a partial read")
	}
	if st := s.Stats(); st.PartialBytes != got || st.Blobs != 0 {
		t.Errorf("Stats = %+v, want %d partial bytes and no blob", st, got)
	}
}

// A sequential reader with a window gets chunk-sized upstream requests: read
// ahead never degenerates into block-sized slivers.
func TestSequentialReadAheadUsesWholeChunks(t *testing.T) {
	const chunk = 256 << 10
	data := genData(10*chunk+12345, 2)
	o := &fakeOrigin{data: data}
	s := newStore(t, Options{ChunkSize: chunk})
	openRead(t, s, fileFor("a.bin", data), o)
	// The block the first read needs, whole chunks of read-ahead, at most
	// one shorter run where the reader's need caught up with them, and the
	// file's tail.
	if got, want := o.requests.Load(), int64(12); got > want {
		t.Errorf("requests = %d, want at most %d: %v", got, want, o.requested())
	}
	short := 0
	for i, r := range o.requested() {
		if r.Size() < chunk && r.Pos != 0 && r.End != int64(len(data)) {
			short++
			if short > 1 {
				t.Errorf("request %d %v is a sliver: %v", i, r, o.requested())
			}
		}
	}
	if got := o.bytes.Load(); got != int64(len(data)) {
		t.Errorf("upstream bytes = %d, want %d", got, len(data))
	}
}

// Sixteen cold readers of one file share its fills: about one copy of the
// file crosses the network, everyone gets the right bytes, and the file is
// promoted. A second read afterwards costs nothing upstream.
func TestConcurrentColdReadersShareFills(t *testing.T) {
	const size = 64<<20 + 12345
	data := genData(size, 3)
	o := &fakeOrigin{data: data}
	s := newStore(t, Options{ChunkSize: 1 << 20})
	f := fileFor("dir/model.safetensors", data)

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			h, err := s.Open(context.Background(), f, o)
			if err != nil {
				errs <- err
				return
			}
			defer h.Close()
			h.Expect(0, size)
			errs <- readSeq(h, 0, size, 32<<10, data)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := o.bytes.Load()
	t.Logf("16 concurrent cold readers of %d bytes: %d upstream bytes (%.3f× size) in %d requests",
		size, got, float64(got)/size, o.requests.Load())
	if float64(got) > 1.05*size {
		t.Errorf("upstream bytes = %d, want <= 1.05 × %d", got, size)
	}
	st := s.Stats()
	if st.Promotions != 1 || st.Blobs != 1 || st.Partials != 0 {
		t.Fatalf("Stats = %+v, want one promoted blob", st)
	}
	blob, err := os.ReadFile(s.paths.snapshot(testRepo, testCommit, f.Path))
	if err != nil || string(blob) != string(data) {
		t.Fatalf("snapshot symlink does not read back the file (err %v)", err)
	}

	// Served from the blob now: no upstream traffic at all.
	before := o.bytes.Load()
	h, err := s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Complete() {
		t.Error("Complete() = false after promotion")
	}
	h.Expect(0, size)
	if err := readSeq(h, 0, size, 1<<20, data); err != nil {
		t.Fatal(err)
	}
	h.Close()
	t.Logf("second read after completion: %d upstream bytes", o.bytes.Load()-before)
	if o.bytes.Load() != before {
		t.Errorf("second read cost %d upstream bytes, want 0", o.bytes.Load()-before)
	}

	// And after a restart the blob is found on disk.
	dir := s.opts.Dir
	s.Close()
	s2 := newStore(t, Options{Dir: dir})
	openRead(t, s2, f, o)
	if o.bytes.Load() != before {
		t.Errorf("read after restart cost %d upstream bytes, want 0", o.bytes.Load()-before)
	}
}

// A fill marks blocks present as they arrive: the first bytes of a cold file
// are served while the request that carries them is still streaming.
func TestFirstBytesServedWhileFillStreams(t *testing.T) {
	const chunk = 1 << 20
	data := genData(3*chunk+100, 4)
	gate := make(chan struct{})
	o := &fakeOrigin{data: data}
	o.hook = func(ctx context.Context, off, n int64) error {
		if off == 0 {
			return nil
		}
		select { // every other chunk waits for the gate
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	o.wrap = func(ctx context.Context, off, n int64, body io.Reader) io.Reader {
		if off != 0 {
			return body
		}
		return &stallAfter{ctx: ctx, r: body, k: DefaultBlockSize, gate: gate}
	}
	s := newStore(t, Options{ChunkSize: chunk})
	f := fileFor("a.bin", data)
	// The deadline only turns a broken (blocking) implementation into a
	// failure instead of a hang; it measures nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := s.Open(ctx, f, o)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.Expect(0, f.Size)

	// Nothing past the first block can arrive before the gate opens, so this
	// read returning proves streaming.
	if err := readSeq(h, 0, DefaultBlockSize, 1000, data); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.PartialBytes != DefaultBlockSize {
		t.Errorf("PartialBytes = %d while the fill is stalled, want %d", st.PartialBytes, DefaultBlockSize)
	}
	close(gate)
	if err := readSeq(h, DefaultBlockSize, f.Size, 32<<10, data); err != nil {
		t.Fatal(err)
	}
	if !h.Complete() {
		t.Error("not promoted after the full read")
	}
}

// A reader that goes away does not abort the fill of the bytes it needed:
// the next reader uses it, and those bytes are fetched once. Its read-ahead,
// which nobody else waited for, is abandoned without counting as a failure,
// and fetched again by the next reader.
func TestDisconnectingReaderDoesNotAbortFill(t *testing.T) {
	const mib = 1 << 20
	data := genData(3*mib, 5)
	gate := make(chan struct{})
	started := make(chan struct{}, 64)
	o := &fakeOrigin{data: data}
	o.hook = func(ctx context.Context, off, n int64) error {
		started <- struct{}{}
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s := newStore(t, Options{ChunkSize: mib})
	f := fileFor("a.bin", data)

	ctx, cancel := context.WithCancel(context.Background())
	h1, err := s.Open(ctx, f, o)
	if err != nil {
		t.Fatal(err)
	}
	h1.Expect(0, f.Size)
	done := make(chan error)
	go func() {
		_, err := h1.ReadAt(make([]byte, 100), 0)
		done <- err
	}()
	// The block it needs, and three requests of read-ahead (the rest of
	// chunk 0, chunks 1 and 2): wait for all of them to reach the origin,
	// or one cancelled before it got there would not be fetched twice.
	for range 4 {
		<-started
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled reader got %v, want context.Canceled", err)
	}
	h1.Close()

	h2, err := s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	h2.Expect(0, f.Size)
	close(gate)
	if err := readSeq(h2, 0, f.Size, 32<<10, data); err != nil {
		t.Fatal(err)
	}
	var first int
	for _, r := range o.requested() {
		if r.Pos == 0 {
			first++
		}
	}
	if first != 1 {
		t.Errorf("the needed chunk was requested %d times, want once (its fill was aborted and redone): %v", first, o.requested())
	}
	// The first read needed one block; everything past it was read-ahead,
	// abandoned with its reader and fetched again by the next one.
	if got, want := o.bytes.Load(), 2*f.Size-DefaultBlockSize; got != want {
		t.Errorf("upstream bytes = %d, want %d (all once, the abandoned read-ahead twice): %v", got, want, o.requested())
	}
	if st := s.Stats(); st.FillErrors != 0 || !h2.Complete() {
		t.Errorf("Stats = %+v, complete %v; want no fill errors and a promoted file", st, h2.Complete())
	}
}

// A body that ends early keeps its whole blocks, and the reader refetches
// the rest; the bytes served are right.
func TestShortBodyIsRetried(t *testing.T) {
	data := genData(1<<20, 6)
	o := &fakeOrigin{data: data}
	var once sync.Once
	var cutAt atomic.Int64 // the first whole block the short body did not deliver
	o.wrap = func(_ context.Context, off, n int64, body io.Reader) io.Reader {
		short := body
		if n > 2*DefaultBlockSize {
			once.Do(func() {
				short = io.LimitReader(body, 100_000) // 1.5 blocks
				cutAt.Store(off + DefaultBlockSize)
			})
		}
		return short
	}
	s := newStore(t, Options{})
	f := fileFor("a.bin", data)
	openRead(t, s, f, o)
	reqs := o.requested()
	retried := 0
	for _, r := range reqs {
		if r.Pos == cutAt.Load() {
			retried++
		}
	}
	if cutAt.Load() == 0 || retried != 1 {
		t.Errorf("requests = %v, want one retry from %d, where the short body stopped", reqs, cutAt.Load())
	}
	if st := s.Stats(); st.FillErrors != 1 || st.Promotions != 1 {
		t.Errorf("Stats = %+v, want one fill error and a promotion", st)
	}
}

// An upstream that keeps failing makes the reader give up after a bounded
// number of attempts, with the upstream error wrapped in a *FillError.
func TestPersistentFailureIsBounded(t *testing.T) {
	data := genData(200_000, 7)
	boom := errors.New("upstream 503")
	o := &fakeOrigin{data: data, hook: func(context.Context, int64, int64) error { return boom }}
	s := newStore(t, Options{})
	h, err := s.Open(context.Background(), fileFor("a.bin", data), o)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	_, err = h.ReadAt(make([]byte, 10), 70_000)
	var fe *FillError
	if !errors.As(err, &fe) || !errors.Is(err, boom) || fe.Off != DefaultBlockSize {
		t.Fatalf("ReadAt error = %v, want *FillError at %d wrapping %v", err, DefaultBlockSize, boom)
	}
	if got := o.requests.Load(); got != maxFillAttempts {
		t.Errorf("requests = %d, want %d", got, maxFillAttempts)
	}

	// The upstream recovers: the next read starts afresh and succeeds.
	o.hook = nil
	if err := readSeq(h, 70_000, 80_000, 10_000, data); err != nil {
		t.Fatal(err)
	}
}

// Reads without an Expect window fetch only the blocks they touch.
func TestNoWindowNoReadAhead(t *testing.T) {
	data := genData(4<<20, 8)
	o := &fakeOrigin{data: data}
	s := newStore(t, Options{})
	h, err := s.Open(context.Background(), fileFor("a.bin", data), o)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := readSeq(h, 3*DefaultBlockSize+10, 3*DefaultBlockSize+20, 10, data); err != nil {
		t.Fatal(err)
	}
	want := []ranges.Range{{Pos: 3 * DefaultBlockSize, End: 4 * DefaultBlockSize}}
	if got := o.requested(); len(got) != 1 || got[0] != want[0] {
		t.Errorf("requests = %v, want %v", got, want)
	}
}
