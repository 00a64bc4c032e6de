package cache

import (
	"context"
	"testing"
)

// Issue 21: with a shared store, the origin serves fills chunk by chunk
// (internal/sharedfill), and the cache's fills, split at ChunkSize from
// wherever a missing run began, straddled two of its chunks nearly every
// time. With AlignFills every request lies within one chunk.
func TestAlignedFillsStayWithinAChunk(t *testing.T) {
	const chunk = 4 * bs
	for _, align := range []bool{true, false} {
		s := newStore(t, Options{ChunkSize: chunk, AlignFills: align})
		data := genData(21*bs+999, 61)
		o := &fakeOrigin{data: data}
		f := fileFor("aligned.bin", data)
		h, err := s.Open(context.Background(), f, o)
		if err != nil {
			t.Fatal(err)
		}
		// A read that straddles chunks 0 and 1 with no window: the
		// needed blocks alone.
		if err := readSeq(h, 3*bs+10, 5*bs, bs, data); err != nil {
			t.Fatal(err)
		}
		// A sequential read from off a chunk boundary to the end, with
		// read-ahead.
		start := int64(6*bs + 100)
		h.Expect(start, f.Size)
		if err := readSeq(h, start, f.Size, 32<<10, data); err != nil {
			t.Fatal(err)
		}
		h.Close()
		settle(s)
		straddling := 0
		for _, r := range o.requested() {
			if r.Pos/chunk != (r.End-1)/chunk {
				straddling++
			}
		}
		t.Logf("align %v: %d requests, %d straddling chunks, %d bytes asked for", align, o.requests.Load(), straddling, o.bytes.Load())
		if align && straddling > 0 {
			t.Errorf("aligned: %d of the requests %v straddle a chunk boundary", straddling, o.requested())
		}
		if !align && straddling == 0 {
			t.Errorf("unaligned: no request straddles a chunk boundary (%v): the test shows nothing", o.requested())
		}
		if got, want := o.bytes.Load(), f.Size-(3*bs)-(6*bs-5*bs); got != want {
			t.Errorf("align %v: asked for %d bytes, want each missing byte once (%d)", align, got, want)
		}
	}
}
