package gpu

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// Helpers shared by the tests on the Go fake and the cuda-tagged tests on
// the C fake (or a real driver).

// CUresult values the tests inject or expect.
const (
	cudaErrorInvalidValue     = 1
	cudaErrorOutOfMemory      = 2
	cudaErrorNoDevice         = 100
	cudaErrorInvalidDevice    = 101
	cudaErrorInvalidContext   = 201
	cudaErrorInvalidHandle    = 400
	cudaErrorECCUncorrectable = 214
	cudaErrorIllegalAddress   = 700 // sticky
	cudaErrorLaunchFailed     = 719 // sticky
	cudaErrorNotSupported     = 801
	cudaErrorUnknown          = 999
	cudaErrorOutOfMemoryName  = "CUDA_ERROR_OUT_OF_MEMORY"
)

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

// verifyImage checks a lease against the sources' bytes: placements
// packed, aligned and disjoint, every byte read back, and zeros in the
// gaps and after the last placement, up to the allocation's rounded end.
// It returns the image read back.
func verifyImage(t *testing.T, c *Copier, l *Lease, want [][]byte, align int64) []byte {
	t.Helper()
	if len(l.Placements) != len(want) {
		t.Fatalf("%d placements, want %d", len(l.Placements), len(want))
	}
	switch l.Handover {
	case HandoverIPC:
		if len(l.IPCHandle) != 64 {
			t.Errorf("IPC handle has %d bytes", len(l.IPCHandle))
		}
	case HandoverFD:
		if l.IPCHandle != nil {
			t.Errorf("an FD lease has an IPC handle")
		}
	default:
		t.Errorf("lease handover %v", l.Handover)
	}
	img := make([]byte, l.Bytes)
	if err := c.ReadBack(context.Background(), l.ID, 0, img); err != nil {
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
	if end > l.Bytes {
		t.Errorf("lease is %d bytes, placements end at %d", l.Bytes, end)
	} else if !isZero(img[end:]) {
		t.Errorf("the %d bytes after the last placement are not zero", l.Bytes-end)
	}
	return img
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
	data     []byte
	blockAt  int64
	entered  chan struct{}
	release  chan struct{}
	once     sync.Once
	openOnce sync.Once
}

func newGatedReader(data []byte, blockAt int64) *gatedReader {
	return &gatedReader{data: data, blockAt: blockAt, entered: make(chan struct{}), release: make(chan struct{})}
}

// open lets the blocked read go; it may be called more than once, so that
// a test can also defer it and never leave a reader (and Close) hanging.
func (g *gatedReader) open() { g.openOnce.Do(func() { close(g.release) }) }

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

// hangAfter bounds the waits in tests. It times nothing: it only turns a
// deadlock into a failure that names what never happened.
const hangAfter = time.Minute

// await receives from ch, failing the test if nothing comes.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangAfter):
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}
