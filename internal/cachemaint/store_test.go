package cachemaint

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
	"testing"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// The trees these tests maintain are written by a real cache.Store, so they
// are what a server leaves behind; the helpers below are the few of
// internal/cache's test helpers that need only its exported API.

// origin serves ranges of an in-memory file.
type origin struct{ data []byte }

func (o *origin) FetchRange(_ context.Context, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n <= 0 || off+n > int64(len(o.data)) {
		return nil, fmt.Errorf("fake: bad range %d+%d of %d", off, n, len(o.data))
	}
	return io.NopCloser(bytes.NewReader(o.data[off : off+n])), nil
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
func fileFor(path string, data []byte) cache.File {
	return cache.File{Repo: testRepo, Commit: testCommit, Path: path, ETag: sha256Hex(data), Size: int64(len(data))}
}

// newStore opens a store on opts.Dir, closed when the test ends (Close is
// idempotent, so a test may close it first to work on a quiet tree).
func newStore(t *testing.T, opts cache.Options) *cache.Store {
	t.Helper()
	s, err := cache.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readSeq reads [off, end) of h with ReadAt calls of step bytes and checks
// every byte against want.
func readSeq(h *cache.Handle, off, end, step int64, want []byte) error {
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

// openRead opens f, reads all of it sequentially within an Expect window and
// closes it. Reading the last byte waits for the promotion's verdict; the
// rest of the promotion (snapshot links) is done once the store is closed,
// which every caller does before maintaining the tree.
func openRead(t *testing.T, s *cache.Store, f cache.File, o *origin) {
	t.Helper()
	h, err := s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	h.Expect(0, f.Size)
	if err := readSeq(h, 0, f.Size, 32<<10, o.data); err != nil {
		t.Fatal(err)
	}
	h.Close()
}
