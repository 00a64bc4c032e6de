package tensor

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
)

// rangeBlob is a memBlob that is also a RangeReader: it records what each
// ReadRanges call asked and fails the next fail calls.
type rangeBlob struct {
	memBlob
	mu    sync.Mutex
	calls [][]int64 // offsets asked, per call
	bytes int64
	reads int // ReadAt calls
	fail  int
}

func (b *rangeBlob) ReadRanges(bufs [][]byte, offs []int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail > 0 {
		b.fail--
		return errors.New("upstream broke")
	}
	b.calls = append(b.calls, offs)
	for i, buf := range bufs {
		copy(buf, b.data[offs[i]:])
		b.bytes += int64(len(buf))
	}
	return nil
}

func (b *rangeBlob) ReadAt(p []byte, off int64) (int, error) {
	b.mu.Lock()
	b.reads++
	b.mu.Unlock()
	return b.memBlob.ReadAt(p, off)
}

// columnPieces is n pieces of size bytes every stride bytes of blob: a
// column shard's, one per row, and their bytes as assembled.
func columnPieces(blob Blob, data []byte, n, size, stride int64) ([]Piece, []byte) {
	var ps []Piece
	var want []byte
	for i := range n {
		ps = append(ps, Piece{Blob: blob, Off: i * stride, Len: size})
		want = append(want, data[i*stride:i*stride+size]...)
	}
	return ps, want
}

func patterned(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131 + i>>11)
	}
	return b
}

// A column shard (2 KiB of every 16 KiB row) is sparse: it is read through
// ReadRanges, a batch at a time, costing exactly its own bytes; the cache
// path (Expect, ReadAt) is never used.
func TestColumnShardReadsAroundTheCache(t *testing.T) {
	data := patterned(2500 * 16 << 10)
	blob := &rangeBlob{memBlob: memBlob{data: data}}
	pieces, want := columnPieces(blob, data, 2500, 2<<10, 16<<10)
	asm := NewAssembly(nil, pieces, 128<<10, 64<<10)
	if !asm.Sparse() {
		t.Fatal("a column shard is not read as sparse")
	}
	got, err := io.ReadAll(io.NewSectionReader(asm, 0, asm.Size()))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read: %v, equal %v", err, bytes.Equal(got, want))
	}
	if blob.bytes != int64(len(want)) || len(blob.calls) != 2 {
		t.Errorf("%d bytes in %d ReadRanges calls; want %d in 2 (one per 4 MiB batch)", blob.bytes, len(blob.calls), len(want))
	}
	for i, offs := range blob.calls {
		if len(offs) > sparseBatch/(2<<10) {
			t.Errorf("call %d asked %d ranges, more than a batch holds", i, len(offs))
		}
	}
	if blob.reads != 0 || len(blob.windows) != 0 {
		t.Errorf("%d cached reads and windows %v: a sparse read went through the cache", blob.reads, blob.windows)
	}
}

// Concurrent readers at scattered offsets (the GPU stager's way) get the
// right bytes, and each batch is loaded once.
func TestSparseConcurrentReaders(t *testing.T) {
	data := patterned(3000 * 16 << 10)
	blob := &rangeBlob{memBlob: memBlob{data: data}}
	pieces, want := columnPieces(blob, data, 3000, 2<<10, 16<<10)
	prefix := []byte("a subset file's header")
	want = append(append([]byte{}, prefix...), want...)
	asm := NewAssembly(prefix, pieces, 128<<10, 64<<10)
	const chunk = 1 << 20
	got := make([]byte, asm.Size())
	var wg sync.WaitGroup
	errs := make(chan error, len(got)/chunk+1)
	for off := int64(0); off < asm.Size(); off += chunk {
		wg.Go(func() {
			end := min(off+chunk, asm.Size())
			if _, err := asm.ReadAt(got[off:end], off); err != nil && err != io.EOF {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("wrong bytes")
	}
	blob.mu.Lock()
	defer blob.mu.Unlock()
	if blob.bytes != int64(len(want)-len(prefix)) {
		t.Errorf("%d bytes fetched for %d: a batch was loaded twice", blob.bytes, len(want)-len(prefix))
	}
}

// A failed batch fails the read, with no bytes of it; the next read tries
// again.
func TestSparseReadFailureIsRetried(t *testing.T) {
	data := patterned(1000 * 16 << 10)
	blob := &rangeBlob{memBlob: memBlob{data: data}, fail: 1}
	pieces, want := columnPieces(blob, data, 1000, 2<<10, 16<<10)
	asm := NewAssembly(nil, pieces, 128<<10, 64<<10)
	p := make([]byte, 4096)
	if n, err := asm.ReadAt(p, 0); err == nil || n != 0 {
		t.Fatalf("ReadAt = %d, %v; want 0 and the error", n, err)
	}
	if _, err := asm.ReadAt(p, 0); err != nil || !bytes.Equal(p, want[:4096]) {
		t.Fatalf("retry: %v", err)
	}
}

// Reads that block rounding costs little more stay on the cached path: a
// contiguous tensor, a short slice, a shard of a small tensor, and any
// read of a blob that cannot read ranges.
func TestDenseReadsStayCached(t *testing.T) {
	data := patterned(2500 * 16 << 10)
	rb := &rangeBlob{memBlob: memBlob{data: data}}
	column, _ := columnPieces(rb, data, 2500, 2<<10, 16<<10)
	small, _ := columnPieces(rb, data, 64, 2<<10, 16<<10) // 128 KiB in 1 MiB
	plain, _ := columnPieces(&memBlob{data: data}, data, 2500, 2<<10, 16<<10)
	for name, ps := range map[string][]Piece{
		"whole tensor":     {{Blob: rb, Off: 0, Len: int64(len(data))}},
		"short slice":      {{Blob: rb, Off: 100, Len: 8}, {Blob: rb, Off: 16<<10 + 100, Len: 8}},
		"small shard":      small,
		"no ReadRanges":    plain,
		"2/3 of every row": func() []Piece { ps, _ := columnPieces(rb, data, 2500, 11<<10, 16<<10); return ps }(),
	} {
		if NewAssembly(nil, ps, 128<<10, 64<<10).Sparse() {
			t.Errorf("%s: read as sparse", name)
		}
	}
	if NewAssembly(nil, column, 128<<10, 0).Sparse() {
		t.Error("block size 0: read as sparse")
	}
	// Half of every row would cost 2x through the cache: sparse.
	ps, _ := columnPieces(rb, data, 2500, 8<<10, 16<<10)
	if !NewAssembly(nil, ps, 128<<10, 64<<10).Sparse() {
		t.Error("half of every row is not read as sparse")
	}
}
