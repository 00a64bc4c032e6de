package gpu

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"testing"
)

func TestLayout(t *testing.T) {
	r := bytes.NewReader(nil)
	src := func(n int64) Source { return Source{Name: "t", R: r, Len: n} }
	pl, total, err := layout([]Source{src(1), src(256), src(0), src(300), src(0)}, 256)
	if err != nil {
		t.Fatal(err)
	}
	// An empty source still starts on an aligned offset inside the allocation.
	want := []int64{0, 256, 512, 512, 1024}
	for i, p := range pl {
		if p.Offset != want[i] {
			t.Errorf("placement %d at %d, want %d", i, p.Offset, want[i])
		}
	}
	if total != 1024 {
		t.Errorf("total %d, want 1024", total)
	}

	for name, srcs := range map[string][]Source{
		"none":          nil,
		"nil reader":    {{Len: 1}},
		"negative len":  {{R: r, Len: -1}},
		"negative off":  {{R: r, Off: -1, Len: 1}},
		"off+len wraps": {{R: r, Off: math.MaxInt64, Len: 1}},
		"total wraps":   {src(math.MaxInt64 - 10), src(100)},
		"all empty":     {src(0), src(0)},
	} {
		if _, _, err := layout(srcs, 256); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", name, err)
		}
	}
}

// TestFillFrom fills a lease image in pieces of every size from 1 to past
// the image and checks it against the expected packing, gaps zeroed.
func TestFillFrom(t *testing.T) {
	data := []byte("abcdefghijklmnopqrstuvwxyz0123456789")
	r := bytes.NewReader(data)
	srcs := []Source{
		{Name: "a", R: r, Off: 3, Len: 5},
		{Name: "empty", R: r, Off: 0, Len: 0},
		{Name: "b", R: r, Off: 10, Len: 9},
		{Name: "c", R: r, Off: 0, Len: 1},
	}
	pl, total, err := layout(srcs, 8)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, total)
	for i, p := range pl {
		copy(want[p.Offset:], data[srcs[i].Off:srcs[i].Off+srcs[i].Len])
	}
	fill := fillFrom(srcs, pl)
	for piece := int64(1); piece <= total+1; piece++ {
		got := bytes.Repeat([]byte{0xEE}, int(total))
		for off := int64(0); off < total; off += piece {
			if err := fill(context.Background(), got[off:min(off+piece, total)], off); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("piece %d: image %q, want %q", piece, got, want)
		}
	}
}

func TestFillFromShortRead(t *testing.T) {
	r := bytes.NewReader([]byte("short"))
	srcs := []Source{{Name: "s", R: r, Off: 2, Len: 10}}
	pl, _, err := layout(srcs, 8)
	if err != nil {
		t.Fatal(err)
	}
	err = fillFrom(srcs, pl)(context.Background(), make([]byte, 10), 0)
	var se *SourceError
	if !errors.As(err, &se) || se.Name != "s" || se.Off != 2 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("error %v, want a *SourceError for s at 2 wrapping io.ErrUnexpectedEOF", err)
	}
}

func TestOptionsDefaults(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.DriverPath != DefaultDriverPath || o.PinnedBuffers != DefaultPinnedBuffers ||
		o.BufferSize != DefaultBufferSize || o.Streams != DefaultStreams ||
		o.LeaseTTL != DefaultLeaseTTL || o.Alignment != DefaultAlignment || o.Logger == nil {
		t.Errorf("defaults = %+v", o)
	}
	o, err = Options{BufferSize: 1000, Alignment: 64}.withDefaults()
	if err != nil || o.BufferSize != 1024 {
		t.Errorf("BufferSize 1000 at alignment 64 = %d, %v; want 1024", o.BufferSize, err)
	}
	for _, bad := range []Options{{Alignment: 100}, {Streams: -1}, {BufferSize: -1}, {LeaseTTL: -1}} {
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%+v) accepted", bad)
		}
	}
}
