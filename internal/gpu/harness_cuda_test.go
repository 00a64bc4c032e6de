//go:build cuda && cgo && linux

package gpu

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// realDriverEnv names a real driver library (e.g. libcuda.so.1) to run the
// tests against instead of the fake; tests that need the fake's counters or
// fault injection skip then.
const realDriverEnv = "HUBPROXY_TEST_CUDA_DRIVER"

// fakeLib is the fake driver TestMain builds; each test loads its own copy.
var fakeLib string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if os.Getenv(realDriverEnv) == "" {
		dir, err := os.MkdirTemp("", "fakecuda")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		fakeLib = filepath.Join(dir, "libfakecuda.so")
		cc := strings.Fields(os.Getenv("CC"))
		if len(cc) == 0 {
			cc = []string{"gcc"}
		}
		args := append(cc[1:], "-shared", "-fPIC", "-O2", "-pthread", "-Wall",
			"-o", fakeLib, filepath.Join("testdata", "fakecuda", "fakecuda.c"))
		if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the fake CUDA driver: %v\n%s", err, out)
			return 1
		}
	}
	return m.Run()
}

// harness is a Copier over a private fake driver (fc) or the real one (fc
// nil). Its cleanup closes the copier and, on the fake, checks that nothing
// leaked and the fake saw no misuse.
type harness struct {
	c  *Copier
	fc *fakeControl
}

// newHarness opens a copier. setup configures the fake before Open.
func newHarness(t *testing.T, opts Options, setup func(*fakeControl)) *harness {
	t.Helper()
	if real := os.Getenv(realDriverEnv); real != "" {
		opts.DriverPath = real
		c, err := Open(opts)
		if err != nil || !c.Available() {
			_, why := c.Devices()
			t.Fatalf("Open(%s): %v, %v", real, err, why)
		}
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return &harness{c: c}
	}
	// A fresh file is a fresh library instance (dlopen dedups by inode),
	// so every test gets its own fake state.
	path := filepath.Join(t.TempDir(), "libfakecuda.so")
	lib, err := os.ReadFile(fakeLib)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, lib, 0o755); err != nil {
		t.Fatal(err)
	}
	fc, err := openFakeControl(path)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(fc)
	}
	opts.DriverPath = path
	c, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if !c.Available() {
		_, why := c.Devices()
		t.Fatalf("copier unavailable: %v", why)
	}
	h := &harness{c: c, fc: fc}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		h.expectLive(t, map[string]int64{"alloc": 0, "host": 0, "stream": 0, "event": 0, "ctx": 0, "violations": 0})
	})
	return h
}

// needFake skips tests that inspect the fake on a real driver.
func (h *harness) needFake(t *testing.T) {
	t.Helper()
	if h.fc == nil {
		t.Skip("needs the fake driver")
	}
}

func (h *harness) expectLive(t *testing.T, want map[string]int64) {
	t.Helper()
	if h.fc == nil {
		return
	}
	for kind, n := range want {
		if got := h.fc.live(kind); got != n {
			t.Errorf("fake live %s = %d, want %d", kind, got, n)
		}
	}
}

func (h *harness) expectCalls(t *testing.T, name string, want int64) {
	t.Helper()
	if h.fc == nil {
		return
	}
	if got := h.fc.calls(name); got != want {
		t.Errorf("fake calls %s = %d, want %d", name, got, want)
	}
}

// leased returns the device's LeasedBytes.
func (h *harness) leased(t *testing.T, dev int) int64 {
	t.Helper()
	ds, err := h.c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	return ds[dev].LeasedBytes
}

// smallOpts makes pieces small so that tests cross buffer boundaries often.
func smallOpts() Options {
	return Options{PinnedBuffers: 3, BufferSize: 4096, Streams: 2, Alignment: 256}
}

// makeSources returns sources of the given sizes, each a window in the
// middle of a larger random buffer (so Off matters), and their bytes.
func makeSources(rng *rand.Rand, sizes ...int64) ([]Source, [][]byte) {
	srcs := make([]Source, len(sizes))
	want := make([][]byte, len(sizes))
	for i, n := range sizes {
		pre := rng.Int64N(100)
		buf := make([]byte, pre+n+rng.Int64N(100))
		fillRandom(rng, buf)
		srcs[i] = Source{Name: fmt.Sprintf("t%d", i), R: bytes.NewReader(buf), Off: pre, Len: n}
		want[i] = buf[pre : pre+n]
	}
	return srcs, want
}

// verify checks a lease against the sources' bytes: placements packed,
// aligned and disjoint, every byte read back (and, on the fake, through
// the IPC handle as a consumer would), and zeros in the gaps.
func verify(t *testing.T, h *harness, l *Lease, want [][]byte, align int64) {
	t.Helper()
	if len(l.Placements) != len(want) {
		t.Fatalf("%d placements, want %d", len(l.Placements), len(want))
	}
	if len(l.IPCHandle) != 64 {
		t.Errorf("IPC handle has %d bytes", len(l.IPCHandle))
	}
	img := make([]byte, l.Bytes)
	if err := h.c.ReadBack(context.Background(), l.ID, 0, img); err != nil {
		t.Fatalf("ReadBack: %v", err)
	}
	var end int64
	for i, p := range l.Placements {
		if p.Offset%align != 0 || p.Offset < end || p.Offset-end >= align || p.Len != int64(len(want[i])) {
			t.Fatalf("placement %d = %+v after end %d (align %d, len %d)", i, p, end, align, len(want[i]))
		}
		if !isZero(img[end:p.Offset]) {
			t.Errorf("gap before placement %d is not zero", i)
		}
		if got := img[p.Offset : p.Offset+p.Len]; !bytes.Equal(got, want[i]) {
			t.Errorf("placement %d (%s, %d bytes at %d): bytes differ", i, p.Name, p.Len, p.Offset)
		}
		end = p.Offset + p.Len
	}
	if end != l.Bytes {
		t.Errorf("lease is %d bytes, placements end at %d", l.Bytes, end)
	}
	if h.fc != nil {
		got := make([]byte, l.Bytes)
		if rc := h.fc.ipcRead(l.IPCHandle, 0, got); rc != 0 || !bytes.Equal(got, img) {
			t.Errorf("reading through the IPC handle: rc %d, equal %v", rc, bytes.Equal(got, img))
		}
	}
}

func fillRandom(rng *rand.Rand, b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, rng.Uint64())
		b = b[8:]
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// gatedReader serves data, but the first read that reaches blockAt closes
// entered and blocks until release is closed. Other reads pass.
type gatedReader struct {
	data    []byte
	blockAt int64
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGatedReader(data []byte, blockAt int64) *gatedReader {
	return &gatedReader{data: data, blockAt: blockAt, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > g.blockAt {
		first := false
		g.once.Do(func() { first = true })
		if first {
			close(g.entered)
			<-g.release
		}
	}
	return bytes.NewReader(g.data).ReadAt(p, off)
}

// failingReader returns err for reads that reach failAt.
type failingReader struct {
	data   []byte
	failAt int64
	err    error
}

func (f *failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.failAt {
		n := max(0, f.failAt-off)
		copy(p, f.data[off:off+n])
		return int(n), f.err
	}
	return bytes.NewReader(f.data).ReadAt(p, off)
}

var _ io.ReaderAt = (*failingReader)(nil)

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// asDriverError asserts err carries a *DriverError for call with code.
func asDriverError(t *testing.T, err error, call string, code int) {
	t.Helper()
	var de *DriverError
	if !errors.As(err, &de) {
		t.Fatalf("error %v is not a *DriverError", err)
	}
	if de.Call != call || de.Code != code {
		t.Fatalf("DriverError = %+v, want call %s code %d", de, call, code)
	}
}
