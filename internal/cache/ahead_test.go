package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
)

// aheadSetup is a store with chunks of four blocks, and a file of twenty
// blocks whose first block is already present, so that a read of it with an
// Expect window plans nothing but read-ahead: from block 1 to block 16 (four
// chunks of ReadAhead), as three chunks and a run of three blocks. The origin then signals every request on started and stalls
// every body after k bytes until gate is closed (or the request's context
// ends).
type aheadSetup struct {
	s       *Store
	o       *fakeOrigin
	f       File
	data    []byte
	started chan ranges.Range
	gate    chan struct{}
}

const bs = DefaultBlockSize

func newAheadSetup(t *testing.T, opts Options, hooks testHooks, k int64) *aheadSetup {
	t.Helper()
	opts.ChunkSize = 4 * bs
	a := &aheadSetup{
		s:       newStoreHooks(t, opts, hooks),
		data:    genData(20*bs, 60),
		started: make(chan ranges.Range, 64),
		gate:    make(chan struct{}),
	}
	a.o = &fakeOrigin{data: a.data}
	a.f = fileFor("a.bin", a.data)
	h := a.open(t, context.Background())
	if err := readSeq(h, 0, 10, 10, a.data); err != nil {
		t.Fatal(err)
	}
	h.Close()
	settle(a.s)
	// No fill runs now, so changing the origin races with nothing.
	a.o.hook = func(_ context.Context, off, n int64) error {
		a.started <- ranges.Range{Pos: off, End: off + n}
		return nil
	}
	a.o.wrap = func(ctx context.Context, _, _ int64, body io.Reader) io.Reader {
		return &stallAfter{ctx: ctx, r: body, k: k, gate: a.gate}
	}
	return a
}

// waitHook returns a wait hook that signals on the channel returned, and a
// function that drops the signals so far (the setup's own read waits too).
func waitHook() (hooks testHooks, waiting chan struct{}, drain func()) {
	waiting = make(chan struct{}, 64)
	hooks.wait = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	drain = func() {
		for {
			select {
			case <-waiting:
			default:
				return
			}
		}
	}
	return hooks, waiting, drain
}

func (a *aheadSetup) open(t *testing.T, ctx context.Context) *Handle {
	t.Helper()
	h, err := a.s.Open(ctx, a.f, a.o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// The read-ahead fills planned by a read of block 0.
var aheadChunks = []ranges.Range{{Pos: bs, End: 5 * bs}, {Pos: 5 * bs, End: 9 * bs}, {Pos: 9 * bs, End: 13 * bs}, {Pos: 13 * bs, End: 16 * bs}}

// checkNoFailures fails the test if any block is counted as failed or still
// claimed, or a fill error was recorded.
func checkNoFailures(t *testing.T, s *Store, it *item) {
	t.Helper()
	it.mu.Lock()
	fails, pending, ahead := len(it.fails), it.pending.Size(), len(it.ahead)
	it.mu.Unlock()
	if fails != 0 || pending != 0 || ahead != 0 {
		t.Errorf("item has %d failed blocks, %d bytes claimed, %d read-ahead fills; want none", fails, pending, ahead)
	}
	if st := s.Stats(); st.FillErrors != 0 {
		t.Errorf("Stats = %+v, want no fill errors", st)
	}
}

// A handle that goes away (closed, or its context ended) cancels its
// read-ahead: fills still waiting for a slot never reach the origin, the one
// streaming stops, keeping the block it wrote, and none of it counts as a
// failure. A later reader, read-ahead included, reads the released blocks.
func TestAbandonedReadAheadIsCancelled(t *testing.T) {
	for _, how := range []string{"Close", "context"} {
		t.Run(how, func(t *testing.T) {
			// One slot: one read-ahead fill streams, three wait for it.
			a := newAheadSetup(t, Options{MaxFills: 1}, testHooks{}, bs)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h := a.open(t, ctx)
			it := h.it
			h.Expect(0, a.f.Size)
			if err := readSeq(h, 0, 10, 10, a.data); err != nil {
				t.Fatal(err)
			}
			first := waitChan(t, a.started, "a read-ahead request")
			waitItem(t, it, "the first block of the streaming fill", func() bool {
				return it.present.Present(ranges.Range{Pos: first.Pos, End: first.Pos + bs})
			})

			if how == "Close" {
				h.Close()
			} else {
				cancel()
			}
			// Cancelled fills hand their claims back; a fill that was not
			// cancelled would hold its claim until the gate opens.
			waitItem(t, it, "the read-ahead to stop", func() bool { return it.pending.Size() == 0 })
			close(a.gate)
			settle(a.s)

			if got := a.o.requests.Load(); got != 2 {
				t.Errorf("origin requests = %d, want 2 (block 0, and the one read-ahead fill that had started): %v", got, a.o.requested())
			}
			if got := a.o.served.Load(); got != 2*bs {
				t.Errorf("origin served %d bytes, want %d (block 0, and what the streaming fill got before it stopped)", got, 2*bs)
			}
			if st := a.s.Stats(); st.PartialBytes != 2*bs {
				t.Errorf("Stats = %+v, want the 2 blocks received kept", st)
			}
			var sc sidecar
			if b, err := os.ReadFile(it.sidecarPath); err != nil || json.Unmarshal(b, &sc) != nil {
				t.Errorf("reading the sidecar: %v", err)
			} else if !sc.Present.Present(ranges.Range{Pos: first.Pos, End: first.Pos + bs}) {
				t.Errorf("sidecar present = %v, want the block the cancelled fill wrote recorded", sc.Present.Ranges())
			}
			checkNoFailures(t, a.s, it)

			// A new reader with a window plans read-ahead over the released
			// blocks (a failed run would be skipped) and reads them all.
			a.o.hook, a.o.wrap = nil, nil
			h2 := a.open(t, context.Background())
			h2.Expect(0, a.f.Size)
			if err := readSeq(h2, 0, a.f.Size, 32<<10, a.data); err != nil {
				t.Fatal(err)
			}
			if !h2.Complete() {
				t.Error("not promoted after a full read")
			}
			if st := a.s.Stats(); st.FillErrors != 0 {
				t.Errorf("Stats = %+v, want no fill errors", st)
			}
		})
	}
}

// A reader that waits for blocks of another handle's read-ahead adopts the
// fill: it runs to completion after that handle is closed, and the reader
// gets its bytes without a request of its own. The owner's other read-ahead,
// which nobody waited for, is cancelled.
func TestAdoptedReadAheadOutlivesItsHandle(t *testing.T) {
	hooks, waiting, drain := waitHook()
	a := newAheadSetup(t, Options{}, hooks, bs)
	drain()
	h1 := a.open(t, context.Background())
	it := h1.it
	h1.Expect(0, a.f.Size)
	if err := readSeq(h1, 0, 10, 10, a.data); err != nil {
		t.Fatal(err)
	}
	for range aheadChunks {
		waitChan(t, a.started, "the read-ahead requests")
	}
	waitItem(t, it, "a block of each read-ahead fill", func() bool { return it.present.Size() == bs*int64(1+len(aheadChunks)) })

	// h2 needs the second block of the middle chunk, still on its way.
	mid := aheadChunks[1]
	h2 := a.open(t, context.Background())
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		b := make([]byte, 1000)
		_, err := h2.ReadAt(b, mid.Pos+bs+100)
		got <- result{b, err}
	}()
	waitChan(t, waiting, "the second reader to wait")

	h1.Close()
	close(a.gate)
	r := waitChan(t, got, "the second reader")
	if r.err != nil || !bytes.Equal(r.b, a.data[mid.Pos+bs+100:mid.Pos+bs+1100]) {
		t.Fatalf("second reader: err %v, right bytes %v", r.err, bytes.Equal(r.b, a.data[mid.Pos+bs+100:mid.Pos+bs+1100]))
	}
	h2.Close()
	settle(a.s)

	if got := a.o.requests.Load(); got != 1+int64(len(aheadChunks)) {
		t.Errorf("origin requests = %d, want %d (no refetch of the adopted chunk): %v", got, 1+len(aheadChunks), a.o.requested())
	}
	it.mu.Lock()
	adopted := it.present.Present(mid)
	var completed []ranges.Range
	for _, c := range aheadChunks {
		if c != mid && it.present.Present(c) {
			completed = append(completed, c)
		}
	}
	it.mu.Unlock()
	if !adopted {
		t.Errorf("the adopted chunk %v did not complete", mid)
	}
	if len(completed) > 0 {
		t.Errorf("read-ahead nobody waited for ran to completion after its handle closed: %v", completed)
	}
	checkNoFailures(t, a.s, it)
}

// A read still in flight when its handle is closed plans no more read-ahead
// when it wakes up, so nothing is claimed on behalf of a closed handle.
func TestNoReadAheadAfterClose(t *testing.T) {
	hooks, waiting, drain := waitHook()
	a := newAheadSetup(t, Options{}, hooks, 0)
	drain()
	h := a.open(t, context.Background())
	it := h.it
	h.Expect(0, a.f.Size)
	// Reading the file once h is closed is only safe while another
	// handle keeps it open.
	a.open(t, context.Background())

	// The read needs block 5, and reads ahead three chunks and the short
	// run to the end of the window.
	done := make(chan error, 1)
	go func() { done <- readSeq(h, 5*bs, 5*bs+10, 10, a.data) }()
	for range 5 {
		waitChan(t, a.started, "the fills of the read")
	}
	waitChan(t, waiting, "the read to wait")

	h.Close()
	// Its read-ahead stops and hands its claims back, which wakes the read.
	waitItem(t, it, "the read-ahead to stop", func() bool { return len(it.ahead) == 0 })
	close(a.gate)
	if err := waitChan(t, done, "the read"); err != nil {
		t.Fatal(err)
	}
	settle(a.s)

	if got := a.o.requests.Load(); got != 6 {
		t.Errorf("origin requests = %d, want 6 (block 0, and the five fills of the read): %v", got, a.o.requested())
	}
	it.mu.Lock()
	present := it.present.Ranges()
	it.mu.Unlock()
	want := []ranges.Range{{Pos: 0, End: bs}, {Pos: 5 * bs, End: 6 * bs}}
	if len(present) != 2 || present[0] != want[0] || present[1] != want[1] {
		t.Errorf("present = %v, want %v", present, want)
	}
	checkNoFailures(t, a.s, it)
}
