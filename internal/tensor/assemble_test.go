package tensor

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"testing"

	"github.com/hubproxy/hubproxy/internal/header"
)

// memBlob is a Blob over a byte slice that records Expect windows.
type memBlob struct {
	data    []byte
	windows [][2]int64
}

func (b *memBlob) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b.data)) {
		return 0, io.EOF
	}
	n := copy(p, b.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (b *memBlob) Expect(off, end int64)        { b.windows = append(b.windows, [2]int64{off, end}) }
func (b *memBlob) Present(off, end int64) int64 { return end - off }
func (b *memBlob) Close() error                 { return nil }

func TestAssemblyLaysPiecesEndToEnd(t *testing.T) {
	a := &memBlob{data: []byte("0123456789abcdefghij")}
	b := &memBlob{data: []byte("ABCDEFGHIJ")}
	asm := NewAssembly([]byte("hdr:"), []Piece{
		{Blob: a, Off: 2, Len: 3},  // "234"
		{Blob: a, Off: 6, Len: 2},  // "67": a 1-byte gap, merged into the same run
		{Blob: b, Off: 0, Len: 0},  // empty: dropped
		{Blob: b, Off: 5, Len: 4},  // "FGHI"
		{Blob: a, Off: 18, Len: 2}, // "ij": far from the first run, a run of its own
	}, 4, 0)
	want := "hdr:23467FGHIij"
	if asm.Size() != int64(len(want)) {
		t.Fatalf("size %d, want %d", asm.Size(), len(want))
	}
	got, err := io.ReadAll(io.NewSectionReader(asm, 0, asm.Size()))
	if err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
	// Reads at every offset and length agree with the whole.
	for off := 0; off < len(want); off++ {
		for n := 1; off+n <= len(want); n++ {
			p := make([]byte, n)
			if _, err := asm.ReadAt(p, int64(off)); err != nil && !(err == io.EOF && off+n == len(want)) {
				t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
			}
			if string(p) != want[off:off+n] {
				t.Fatalf("ReadAt(%d, %d) = %q", off, n, p)
			}
		}
	}
	// Each run was announced as a whole: [2,8) and [18,20) on a, [5,9) on b.
	if len(a.windows) == 0 || a.windows[0] != [2]int64{2, 8} {
		t.Errorf("a's windows %v, want [2 8] first", a.windows)
	}
	if asm.Present(0, asm.Size()) != asm.Size() || !asm.Complete() {
		t.Errorf("Present %d, want %d", asm.Present(0, asm.Size()), asm.Size())
	}
}

func TestSubsetHeaderIsAValidHeader(t *testing.T) {
	sel := []header.Tensor{
		{Name: "b", DType: "F32", Shape: []uint64{2, 2}, Begin: 100, End: 116},
		{Name: "a", DType: "U8", Shape: []uint64{3}, Begin: 0, End: 3},
		{Name: "empty", DType: "F16", Shape: []uint64{0}, Begin: 3, End: 3},
	}
	head, err := SubsetHeader(sel, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(head)
	if int(n)+8 != len(head) || n%8 != 0 {
		t.Fatalf("header length %d in a %d-byte prefix; want a multiple of 8 filling it", n, len(head))
	}
	file := append(append([]byte{}, head...), make([]byte, 16+3)...)
	h, err := header.Parse(bytes.NewReader(file), int64(len(file)), header.Options{})
	if err != nil {
		t.Fatalf("the subset header does not parse: %v", err)
	}
	if got, _ := h.Lookup("b"); got.Begin != 0 || got.End != 16 {
		t.Errorf("b at [%d,%d), want [0,16): tensors are packed in the order given", got.Begin, got.End)
	}
	if got, _ := h.Lookup("a"); got.Begin != 16 || got.End != 19 {
		t.Errorf("a at [%d,%d), want [16,19)", got.Begin, got.End)
	}
	if h.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", h.Metadata)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimRight(head[8:], " "), &raw); err != nil || len(raw) != 4 {
		t.Errorf("JSON keys %d, %v", len(raw), err)
	}
	if _, err := SubsetHeader([]header.Tensor{sel[0], sel[0]}, nil); err == nil {
		t.Error("a tensor selected twice was accepted")
	}
}

func TestCommonMetadata(t *testing.T) {
	f := func(m map[string]string) File { return File{Header: &header.Header{Metadata: m}} }
	got := CommonMetadata([]File{f(map[string]string{"format": "pt", "x": "1"}), f(map[string]string{"format": "pt", "x": "2"})})
	if len(got) != 1 || got["format"] != "pt" {
		t.Errorf("common %v", got)
	}
	if CommonMetadata([]File{f(nil), f(map[string]string{"format": "pt"})}) != nil {
		t.Error("metadata absent from one file kept")
	}
}
