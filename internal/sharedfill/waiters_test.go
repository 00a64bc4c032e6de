package sharedfill

import (
	"bytes"
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// trickle is an upstream that sends a piece every pause, recording the size
// of every request.
type trickle struct {
	data  []byte
	piece int
	pause time.Duration
	gate  chan struct{} // when set, bodies send nothing until it is closed
	bytes atomic.Int64
	mu    sync.Mutex
	asked []int64
}

func (u *trickle) FetchRange(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	u.mu.Lock()
	u.asked = append(u.asked, n)
	u.mu.Unlock()
	return &trickleBody{u: u, ctx: ctx, rest: u.data[off : off+n]}, nil
}

func (u *trickle) requests() []int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]int64(nil), u.asked...)
}

type trickleBody struct {
	u    *trickle
	ctx  context.Context
	rest []byte
}

func (b *trickleBody) Read(p []byte) (int, error) {
	if len(b.rest) == 0 {
		return 0, io.EOF
	}
	if b.u.gate != nil {
		select {
		case <-b.u.gate:
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		}
	}
	if err := sleep(b.ctx, b.u.pause); err != nil {
		return 0, err
	}
	n := copy(p[:min(len(p), b.u.piece)], b.rest)
	b.rest = b.rest[n:]
	b.u.bytes.Add(int64(n))
	return n, nil
}

func (b *trickleBody) Close() error { return nil }

// claimHeld waits until some node holds chunk 0's claim of etag.
func claimHeld(t *testing.T, s *Sharer, objs Objects, etag string) {
	t.Helper()
	key := s.claimKey(chunkID{etag, 0}, 0)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := objs.Stat(context.Background(), key); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatal("the owner never claimed the chunk")
		}
	}
}

// Review: with the owner's upstream at 60 KiB/s, waiters got no byte until
// the chunk landed, and an hf_hub_download through a waiting node failed on
// its 10 s read timeout. A waiting reader that has had nothing for
// FallbackAfter reads its own bytes from upstream, only those, while the
// owner goes on.
func TestWaitingReaderIsNotStarved(t *testing.T) {
	store := fileStore(t)
	data := randomData(21, testChunk)
	stuck := &trickle{data: data, piece: 4 << 10, gate: make(chan struct{})}
	owner := newSharer(t, store, nil, Options{Lease: 150 * time.Millisecond})
	ownerDone := make(chan []byte)
	go func() { ownerDone <- read(t, owner.Origin(etagOf(21), testChunk, stuck), 0, testChunk) }()
	claimHeld(t, owner, store, etagOf(21))

	var c claims
	waiter := newSharer(t, store, &c, Options{Lease: 150 * time.Millisecond, MaxWait: time.Minute, FallbackAfter: 50 * time.Millisecond})
	up := &trickle{data: data, piece: 64 << 10}
	got := make(chan []byte)
	off, n := int64(1000), int64(20<<10) // what the client asked for
	go func() { got <- read(t, waiter.Origin(etagOf(21), testChunk, up), off, n) }()
	select {
	case b := <-got:
		if !bytes.Equal(b, data[off:off+n]) {
			t.Fatal("bytes differ")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a reader waiting on a stuck owner got nothing for 10 s")
	}
	if asked := up.requests(); len(asked) != 1 || asked[0] != n {
		t.Errorf("the waiter asked upstream for %v; want just the client's %d bytes", asked, n)
	}
	close(stuck.gate)
	if !bytes.Equal(<-ownerDone, data) {
		t.Fatal("the owner's bytes differ")
	}
}

// Review: waiters gave up on an owner that was 88% done and renewing,
// after a fixed 2 minutes, and fetched the chunk again from byte 0 (4.0×
// the chunk upstream). An owner whose beats show bytes arriving is waited
// for however long it takes; MaxWait bounds only an owner making no
// progress.
func TestProgressingOwnerIsWaitedFor(t *testing.T) {
	store := fileStore(t)
	data := randomData(22, testChunk)
	slow := &trickle{data: data, piece: 4 << 10, pause: 40 * time.Millisecond} // 16 pieces: 640 ms
	owner := newSharer(t, store, nil, Options{Lease: 150 * time.Millisecond})
	ownerDone := make(chan []byte)
	go func() { ownerDone <- read(t, owner.Origin(etagOf(22), testChunk, slow), 0, testChunk) }()
	claimHeld(t, owner, store, etagOf(22))

	var c claims
	waiter := newSharer(t, store, &c, Options{Lease: 150 * time.Millisecond, MaxWait: 250 * time.Millisecond, FallbackAfter: time.Minute})
	up := &trickle{data: data, piece: 64 << 10}
	if got := read(t, waiter.Origin(etagOf(22), testChunk, up), 0, testChunk); !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	if up.bytes.Load() != 0 || c.get(ClaimWaited) != 1 {
		t.Errorf("the waiter fetched %d bytes itself, claims %v; want it to wait for the progressing owner", up.bytes.Load(), c.n)
	}
	<-ownerDone
}

// An owner that renews its claim but fetches nothing is given up on after
// MaxWait: the waiter fetches the chunk itself.
func TestStalledOwnerIsGivenUpOn(t *testing.T) {
	store := fileStore(t)
	data := randomData(23, testChunk)
	stuck := &trickle{data: data, piece: 4 << 10, gate: make(chan struct{})}
	defer close(stuck.gate)
	owner := newSharer(t, store, nil, Options{Lease: 150 * time.Millisecond})
	go func() { // its read ends with the test (the gate opens)
		if body, err := owner.Origin(etagOf(23), testChunk, stuck).FetchRange(context.Background(), 0, testChunk); err == nil {
			io.Copy(io.Discard, body)
			body.Close()
		}
	}()
	claimHeld(t, owner, store, etagOf(23))

	waiter := newSharer(t, store, nil, Options{Lease: 150 * time.Millisecond, MaxWait: 300 * time.Millisecond, FallbackAfter: time.Minute})
	up := &trickle{data: data, piece: 64 << 10}
	if got := read(t, waiter.Origin(etagOf(23), testChunk, up), 0, testChunk); !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	if up.bytes.Load() != testChunk {
		t.Errorf("the waiter fetched %d bytes; want the chunk, once", up.bytes.Load())
	}
}
