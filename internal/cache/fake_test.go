package cache

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// fakeOrigin serves ranges of an in-memory file, counts what it is asked for,
// and lets a test stall, cut short or corrupt responses.
type fakeOrigin struct {
	data []byte

	requests atomic.Int64 // FetchRange calls
	bytes    atomic.Int64 // bytes those calls asked for
	served   atomic.Int64 // bytes read from the bodies returned

	mu   sync.Mutex
	reqs []ranges.Range // guarded by mu

	// hook, if set, runs first in every FetchRange; a non-nil error fails
	// the request. It may block, but must honour ctx.
	hook func(ctx context.Context, off, n int64) error
	// wrap, if set, wraps every response body.
	wrap func(ctx context.Context, off, n int64, body io.Reader) io.Reader
}

func (o *fakeOrigin) FetchRange(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	o.requests.Add(1)
	o.bytes.Add(n)
	o.mu.Lock()
	o.reqs = append(o.reqs, ranges.Range{Pos: off, End: off + n})
	o.mu.Unlock()
	if off < 0 || n <= 0 || off+n > int64(len(o.data)) {
		return nil, fmt.Errorf("fake: bad range %d+%d of %d", off, n, len(o.data))
	}
	if o.hook != nil {
		if err := o.hook(ctx, off, n); err != nil {
			return nil, err
		}
	}
	var body io.Reader = bytes.NewReader(o.data[off : off+n])
	if o.wrap != nil {
		body = o.wrap(ctx, off, n, body)
	}
	return io.NopCloser(&countReader{r: body, n: &o.served}), nil
}

// countReader adds what it reads to n.
type countReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (o *fakeOrigin) requested() []ranges.Range {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]ranges.Range(nil), o.reqs...)
}

// stallAfter yields the first k bytes of r, then blocks until gate closes
// (or ctx ends), then yields the rest.
type stallAfter struct {
	ctx  context.Context
	r    io.Reader
	k    int64
	gate <-chan struct{}
}

func (s *stallAfter) Read(p []byte) (int, error) {
	if s.k <= 0 {
		select {
		case <-s.gate:
		case <-s.ctx.Done():
			return 0, s.ctx.Err()
		}
		return s.r.Read(p)
	}
	if int64(len(p)) > s.k {
		p = p[:s.k]
	}
	n, err := s.r.Read(p)
	s.k -= int64(n)
	return n, err
}

// corruptAt flips the byte at file offset at in every body that covers it.
func corruptAt(at int64) func(context.Context, int64, int64, io.Reader) io.Reader {
	return func(_ context.Context, off, n int64, body io.Reader) io.Reader {
		if at < off || at >= off+n {
			return body
		}
		b, _ := io.ReadAll(body)
		b[at-off] ^= 0xff
		return bytes.NewReader(b)
	}
}

// genData returns n deterministic pseudo-random bytes.
func genData(n int64, seed byte) []byte {
	var s [32]byte
	s[0] = seed
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(s).Read(b)
	return b
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func gitSHA1Hex(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

var (
	testRepo   = hub.MustRepo(hub.Model, "org/model")
	testCommit = strings.Repeat("c", 40)
)

// fileFor describes data as a file of testRepo at path.
func fileFor(path string, data []byte) File {
	return File{Repo: testRepo, Commit: testCommit, Path: path, ETag: sha256Hex(data), Size: int64(len(data))}
}

// newStore opens a store in a fresh directory (unless opts.Dir is set),
// closed when the test ends.
func newStore(t *testing.T, opts Options) *Store {
	t.Helper()
	return newStoreHooks(t, opts, testHooks{})
}

// newStoreHooks is newStore with test hooks.
func newStoreHooks(t *testing.T, opts Options, hooks testHooks) *Store {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := open(opts, hooks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readSeq reads [off, end) of h with ReadAt calls of step bytes, as
// http.ServeContent would, and checks every byte against want.
func readSeq(h *Handle, off, end, step int64, want []byte) error {
	buf := make([]byte, step)
	for pos := off; pos < end; {
		n := min(step, end-pos)
		m, err := h.ReadAt(buf[:n], pos)
		if err != nil && !(errors.Is(err, io.EOF) && int64(m) == n && pos+n == h.Size()) {
			return fmt.Errorf("ReadAt(%d, %d): %w", pos, n, err)
		}
		if !bytes.Equal(buf[:m], want[pos:pos+int64(m)]) {
			return fmt.Errorf("ReadAt(%d, %d): wrong bytes", pos, n)
		}
		pos += int64(m)
	}
	return nil
}

// settle waits for the fills and promotions in flight to finish (their
// tails, such as saving a sidecar, may outlive the read that needed them),
// then for the janitor to remove what they evicted. Only call it when no
// read is in progress.
func settle(s *Store) {
	s.wg.Wait()
	s.jan.wg.Wait()
}

// openRead opens f, reads all of it sequentially within an Expect window and
// closes it.
func openRead(t *testing.T, s *Store, f File, o Origin) {
	t.Helper()
	h, err := s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	h.Expect(0, f.Size)
	if err := readSeq(h, 0, f.Size, 32<<10, o.(*fakeOrigin).data); err != nil {
		t.Fatal(err)
	}
	h.Close()
	settle(s)
}

// hangAfter bounds the waits below. It only turns a broken (blocking)
// implementation into a failure instead of a hang; it measures nothing.
const hangAfter = 30 * time.Second

// waitItem waits until cond, checked under it.mu, holds, waking on every
// change of the item.
func waitItem(t *testing.T, it *item, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(hangAfter)
	defer deadline.Stop()
	for {
		it.mu.Lock()
		ok, ch := cond(), it.changed
		it.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("still waiting for %s", what)
		}
	}
}

// waitChan waits for ch to yield or be closed. Call it on the test's
// goroutine: it ends the test (running its defers) when ch never does.
func waitChan[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	deadline := time.NewTimer(hangAfter)
	defer deadline.Stop()
	select {
	case v := <-ch:
		return v
	case <-deadline.C:
		t.Fatalf("still waiting for %s", what)
		panic("unreachable")
	}
}
