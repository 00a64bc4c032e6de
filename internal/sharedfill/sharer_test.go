package sharedfill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// upstream is a file served from memory, counting what it sends.
type upstream struct {
	data     []byte
	bytes    atomic.Int64
	requests atomic.Int64
	delay    time.Duration // before each answer
	gate     chan struct{} // when set, bodies block until it is closed
}

func (u *upstream) FetchRange(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	u.requests.Add(1)
	if u.delay > 0 {
		if err := sleep(ctx, u.delay); err != nil {
			return nil, err
		}
	}
	if u.gate != nil {
		select {
		case <-u.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	u.bytes.Add(n)
	return io.NopCloser(bytes.NewReader(u.data[off : off+n])), nil
}

const testChunk = 64 << 10

// etagOf is a well-formed etag for tests that never verify it.
func etagOf(i int) string { return fmt.Sprintf("%064x", i+1) }

func fileStore(t *testing.T) *sharedstore.Store {
	t.Helper()
	s, err := sharedstore.Open(context.Background(), "file://"+t.TempDir(), sharedstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type claims struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *claims) add(r string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[r]++
}

func (c *claims) get(r string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[r]
}

// testSecret is the cluster secret of the tests' nodes, unless a test
// gives one of its own.
const testSecret = "sharedfill-test-secret-of-32-bytes-or-more"

func newSharer(t *testing.T, objs Objects, c *claims, opts Options) *Sharer {
	t.Helper()
	opts.ChunkSize = testChunk
	if c != nil {
		opts.OnClaim = c.add
	}
	if opts.Secret == nil {
		opts.Secret = []byte(testSecret)
	}
	s, err := New(objs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func read(t *testing.T, o Upstream, off, n int64) []byte {
	t.Helper()
	body, err := o.FetchRange(context.Background(), off, n)
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

func randomData(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestSharedThroughStore(t *testing.T) {
	store := fileStore(t)
	data := randomData(1, 5*testChunk+1234)
	up := &upstream{data: data}
	var c claims
	a := newSharer(t, store, &c, Options{})
	o := a.Origin(etagOf(0), int64(len(data)), up)
	// A range straddling chunks 1 and 2 fetches both chunks, whole.
	off, n := int64(testChunk+100), int64(testChunk)
	if got := read(t, o, off, n); !bytes.Equal(got, data[off:off+n]) {
		t.Fatal("bytes differ")
	}
	if up.bytes.Load() != 2*testChunk || c.get(ClaimWon) != 2 {
		t.Fatalf("upstream sent %d bytes, claims %v; want two whole chunks won", up.bytes.Load(), c.n)
	}
	// The whole file, including the short last chunk, then again on a
	// new node: nothing more from upstream.
	if got := read(t, o, 0, int64(len(data))); !bytes.Equal(got, data) {
		t.Fatal("whole file differs")
	}
	sent := up.bytes.Load()
	if sent != int64(len(data)) {
		t.Fatalf("upstream sent %d bytes for a %d-byte file", sent, len(data))
	}
	b := newSharer(t, store, nil, Options{})
	if got := read(t, b.Origin(etagOf(0), int64(len(data)), up), 0, int64(len(data))); !bytes.Equal(got, data) {
		t.Fatal("second node's bytes differ")
	}
	if up.bytes.Load() != sent {
		t.Fatalf("a node with the chunks in the store went upstream for %d bytes", up.bytes.Load()-sent)
	}
	// Claims are gone once chunks land.
	var left []string
	store.List(context.Background(), layoutPrefix, func(o sharedstore.Object) error {
		if isKind(o.Key, kindClaim) {
			left = append(left, o.Key)
		}
		return nil
	})
	if len(left) > 0 {
		t.Fatalf("claims left behind: %v", left)
	}
	// Forget removes the file's chunks.
	if n, err := a.Forget(context.Background(), etagOf(0)); err != nil || n != 6 {
		t.Fatalf("Forget: %d, %v; want 6 chunks", n, err)
	}
}

func TestHerdOneFetchPerChunk(t *testing.T) {
	store := fileStore(t)
	data := randomData(2, 8*testChunk)
	up := &upstream{data: data, delay: 30 * time.Millisecond}
	var c claims
	const nodes = 6
	var wg sync.WaitGroup
	for i := range nodes {
		s := newSharer(t, store, &c, Options{Logger: testLogger(t)})
		o := s.Origin(etagOf(1), int64(len(data)), up)
		wg.Go(func() {
			// Each node reads the file in chunk-sized pieces that do
			// not line up with the chunks, as the cache's do.
			skew := int64(i * 4096)
			for off := int64(0); off < int64(len(data)); {
				end := min(off+testChunk-skew, int64(len(data)))
				if off == 0 {
					end = skew + 512
				}
				body, err := o.FetchRange(context.Background(), off, end-off)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := io.ReadAll(body)
				body.Close()
				if err != nil || !bytes.Equal(got, data[off:end]) {
					t.Errorf("node %d at %d: %v, bytes match %v", i, off, err, bytes.Equal(got, data[off:end]))
					return
				}
				off = end
			}
		})
	}
	wg.Wait()
	if got := up.bytes.Load(); got != int64(len(data)) {
		t.Errorf("upstream sent %d bytes for %d nodes reading an %d-byte file; want one copy", got, nodes, len(data))
	}
	t.Logf("claims: %v", c.n)
	if c.get(ClaimWon) != 8 || c.get(ClaimTakenOver) != 0 {
		t.Errorf("claims %v; want 8 won", c.n)
	}
}

func TestTakeOverSilentClaim(t *testing.T) {
	dir := t.TempDir()
	store, err := sharedstore.Open(context.Background(), "file://"+dir, sharedstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := randomData(3, 2*testChunk)
	up := &upstream{data: data}
	var c claims
	s := newSharer(t, store, &c, Options{Lease: 300 * time.Millisecond})
	ctx := context.Background()
	// A node that died holding chunk 0's claim: its claim is fresh but
	// never renewed. Chunk 1's owner died long ago.
	fresh := fmt.Sprintf(`{"owner":"dead","beat":3,"time":%q}`, time.Now().Format(time.RFC3339Nano))
	old := fmt.Sprintf(`{"owner":"dead","beat":3,"time":%q}`, time.Now().Add(-time.Hour).Format(time.RFC3339Nano))
	if err := store.Create(ctx, s.claimKey(chunkID{etagOf(2), 0}, 0), []byte(fresh)); err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx, s.claimKey(chunkID{etagOf(2), 1}, 0), []byte(old)); err != nil {
		t.Fatal(err)
	}
	// Long dead by the store's clock, which stamped it an hour ago.
	touch(t, dir, s.claimKey(chunkID{etagOf(2), 1}, 0), time.Now().Add(-time.Hour))
	o := s.Origin(etagOf(2), int64(len(data)), up)
	start := time.Now()
	if got := read(t, o, testChunk, testChunk); !bytes.Equal(got, data[testChunk:]) {
		t.Fatal("chunk 1 differs")
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("a long-dead claim held the chunk up for %v", d)
	}
	start = time.Now()
	if got := read(t, o, 0, testChunk); !bytes.Equal(got, data[:testChunk]) {
		t.Fatal("chunk 0 differs")
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("a fresh claim was taken over after %v, before its lease ran out", d)
	}
	if c.get(ClaimTakenOver) != 2 {
		t.Errorf("claims %v; want 2 taken over", c.n)
	}
}

func TestLiveOwnerIsWaitedFor(t *testing.T) {
	// The owner's upstream is slow, much slower than the lease: its
	// heartbeat keeps the other node waiting rather than taking over.
	store := fileStore(t)
	data := randomData(4, testChunk)
	slow := &upstream{data: data, delay: 800 * time.Millisecond}
	fast := &upstream{data: data}
	var c claims
	aClaimed := make(chan struct{}) // closed once a holds the chunk's claim
	a := newSharer(t, store, nil, Options{Lease: 200 * time.Millisecond, OnClaim: func(r string) {
		c.add(r)
		if r == ClaimWon {
			close(aClaimed)
		}
	}})
	b := newSharer(t, store, &c, Options{Lease: 200 * time.Millisecond})
	done := make(chan []byte)
	go func() { done <- read(t, a.Origin(etagOf(3), testChunk, slow), 0, testChunk) }()
	select { // a claims first
	case <-aClaimed:
	case <-time.After(10 * time.Second):
		t.Fatal("a never claimed the chunk")
	}
	got := read(t, b.Origin(etagOf(3), testChunk, fast), 0, testChunk)
	if !bytes.Equal(got, data) || !bytes.Equal(<-done, data) {
		t.Fatal("bytes differ")
	}
	if fast.bytes.Load() != 0 || c.get(ClaimWon) != 1 || c.get(ClaimWaited) != 1 {
		t.Fatalf("the waiter fetched %d bytes itself; claims %v", fast.bytes.Load(), c.n)
	}
}

// faulty wraps a store and fails what the test says.
type faulty struct {
	Objects
	down      atomic.Bool  // every call fails
	refused   atomic.Int64 // calls failed because down
	cutAfter  atomic.Int64 // > 0: get bodies fail after this many bytes
	hang      atomic.Bool  // gets hang until their context ends
	getsAfter atomic.Int64
	gets      atomic.Int64 // ReadRange calls of chunk objects
}

var errDown = errors.New("store down (test)")

// isDown reports whether calls fail now, counting those that do.
func (f *faulty) isDown() bool {
	if f.down.Load() {
		f.refused.Add(1)
		return true
	}
	return false
}

func (f *faulty) ReadRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, int64, error) {
	if isKind(key, kindChunk) {
		f.gets.Add(1)
	}
	if f.isDown() {
		return nil, 0, errDown
	}
	if f.hang.Load() {
		<-ctx.Done()
		return nil, 0, ctx.Err()
	}
	body, size, err := f.Objects.ReadRange(ctx, key, off, n)
	if err == nil && f.cutAfter.Load() > 0 && isKind(key, kindChunk) {
		body = &cutBody{ReadCloser: body, left: f.cutAfter.Load()}
	}
	return body, size, err
}

type cutBody struct {
	io.ReadCloser
	left int64
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errors.New("connection reset (test)")
	}
	n, err := c.ReadCloser.Read(p[:min(int64(len(p)), c.left)])
	c.left -= int64(n)
	return n, err
}

func (f *faulty) Create(ctx context.Context, key string, data []byte) error {
	if f.isDown() {
		return errDown
	}
	return f.Objects.Create(ctx, key, data)
}

func (f *faulty) Put(ctx context.Context, key string, data []byte) error {
	if f.isDown() {
		return errDown
	}
	return f.Objects.Put(ctx, key, data)
}

func (f *faulty) Delete(ctx context.Context, key string) error {
	if f.isDown() {
		return errDown
	}
	return f.Objects.Delete(ctx, key)
}

func (f *faulty) Stat(ctx context.Context, key string) (sharedstore.Object, error) {
	if f.isDown() {
		return sharedstore.Object{}, errDown
	}
	return f.Objects.Stat(ctx, key)
}

func TestStoreFailures(t *testing.T) {
	data := randomData(5, 4*testChunk)
	store := &faulty{Objects: fileStore(t)}
	up := &upstream{data: data}
	// No chunks kept in memory: this is about what reads that reach the
	// store do when it fails, and with the file's chunks in memory they
	// would never reach it (verified_test.go covers that).
	s := newSharer(t, store, nil, Options{OpTimeout: 200 * time.Millisecond, StallTimeout: 200 * time.Millisecond, VerifiedChunkBytes: -1})
	clk := useClock(s)
	o := s.Origin(etagOf(4), int64(len(data)), up)
	if got := read(t, o, 0, int64(len(data))); !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}

	t.Run("Down", func(t *testing.T) {
		// The first read's flight may still be putting its chunk and
		// ending its claim; a call of it that succeeds after the store
		// went down would rightly close the breaker again.
		s.wg.Wait()
		store.down.Store(true)
		defer store.down.Store(false)
		fresh := s.Origin(etagOf(5), int64(len(data)), up)
		if got := read(t, fresh, 0, int64(len(data))); !bytes.Equal(got, data) {
			t.Fatal("bytes differ with the store down")
		}
		if h := s.Health(); h.Up || !strings.Contains(h.Reason, "store down") {
			t.Fatalf("health %+v", h)
		}
		store.down.Store(false)
		waitUp(t, s, o, clk)
		if !s.Health().Up {
			t.Fatalf("store never came back: %+v", s.Health())
		}
	})
	t.Run("ResetMidBody", func(t *testing.T) {
		store.cutAfter.Store(1000)
		defer store.cutAfter.Store(0)
		before := up.bytes.Load()
		if got := read(t, o, 0, int64(len(data))); !bytes.Equal(got, data) {
			t.Fatal("bytes differ after a reset")
		}
		if up.bytes.Load() == before {
			t.Fatal("nothing came from upstream after the store's bodies broke")
		}
	})
	t.Run("Hang", func(t *testing.T) {
		waitUp(t, s, o, clk)
		store.hang.Store(true)
		defer store.hang.Store(false)
		start := time.Now()
		if got := read(t, o, 0, int64(len(data))); !bytes.Equal(got, data) {
			t.Fatal("bytes differ with a hung store")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("a hung store held a read for %v", d)
		}
		if h := s.Health(); h.Up || !strings.Contains(h.Reason, "too slow") {
			t.Fatalf("health %+v", h)
		}
	})
}

// Once a down store's pause is over, one read probes it; the others keep
// going upstream rather than each waiting OpTimeout on a store that hangs.
func TestOneProbeAfterThePause(t *testing.T) {
	const chunks = 8
	data := randomData(6, chunks*testChunk)
	store := &faulty{Objects: fileStore(t)}
	up := &upstream{data: data}
	s := newSharer(t, store, nil, Options{OpTimeout: 300 * time.Millisecond, StallTimeout: 300 * time.Millisecond})
	clk := useClock(s)
	o := s.Origin(etagOf(6), int64(len(data)), up)
	store.hang.Store(true)
	s.observe(context.Background(), errStoreSlow) // the store is down...
	clk.Advance(minPause)                         // ...and its pause is over
	before := store.gets.Load()
	var wg sync.WaitGroup
	for i := range chunks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(i) * testChunk
			if got := read(t, o, off, 100); !bytes.Equal(got, data[off:off+100]) {
				t.Errorf("chunk %d: bytes differ", i)
			}
		}()
	}
	wg.Wait()
	if n := store.gets.Load() - before; n != 1 {
		t.Errorf("%d reads went to the hung store after the pause, want 1 probe", n)
	}
	if s.Health().Up {
		t.Error("the hung probe closed the breaker")
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// waitUp lets s's breaker pause pass on clk and reads through o, which
// probes the store, until the store is up again (or a few pauses failed).
func waitUp(t *testing.T, s *Sharer, o Upstream, clk *testutil.Clock) {
	t.Helper()
	for i := 0; i < 10 && !s.Health().Up; i++ {
		clk.Advance(maxPause)
		read(t, o, 0, 10)
	}
}

func TestTornChunkReplaced(t *testing.T) {
	store := fileStore(t)
	data := randomData(6, 2*testChunk)
	up := &upstream{data: data}
	s := newSharer(t, store, nil, Options{})
	key := s.chunkKey(chunkID{etagOf(6), 0})
	if err := store.Create(context.Background(), key, data[:100]); err != nil {
		t.Fatal(err)
	}
	o := s.Origin(etagOf(6), int64(len(data)), up)
	if got := read(t, o, 0, testChunk); !bytes.Equal(got, data[:testChunk]) {
		t.Fatal("bytes differ")
	}
	// The put follows the readers' bytes: give it a moment.
	testutil.Eventually(t, 5*time.Second, "the torn chunk to be replaced", func() bool {
		obj, err := store.Stat(context.Background(), key)
		return err == nil && obj.Size == testChunk+trailerLen
	})
}
