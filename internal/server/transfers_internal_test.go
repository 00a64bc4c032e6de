package server

import (
	"bytes"
	"io"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"
)

// pieceRecorder is a response writer with ReaderFrom (as net/http's is)
// that notes what the statusWriter had counted when each piece began.
type pieceRecorder struct {
	*httptest.ResponseRecorder
	sw     *statusWriter
	counts []int64
}

func (p *pieceRecorder) ReadFrom(src io.Reader) (int64, error) {
	if _, ok := src.(*io.LimitedReader); !ok {
		panic("a piece is not a LimitedReader: sendfile would be lost")
	}
	p.counts = append(p.counts, p.sw.bytes.Load())
	return io.Copy(io.Discard, src)
}

// A large file body goes to the writer in pieces, each a LimitedReader of
// the same file (so net/http can still sendfile it), and the byte count the
// root page reads moves between them; a file shorter than promised ends as
// io.Copy would. Any other source goes whole: its pieces would each copy
// through a buffer of their own.
func TestStatusWriterCountsLargeBodiesAsTheyGo(t *testing.T) {
	for _, tc := range []struct {
		data, limit int64
		file        bool
		counts      []int64
	}{
		{10 << 20, 10 << 20, true, []int64{0, 4 << 20, 8 << 20}},
		{5 << 20, 10 << 20, true, []int64{0, 4 << 20, 5 << 20}},
		{1 << 20, 1 << 20, true, []int64{0}},
		{10 << 20, 10 << 20, false, []int64{0}},
	} {
		var src io.Reader = bytes.NewReader(make([]byte, tc.data))
		if tc.file {
			f, err := os.CreateTemp(t.TempDir(), "body")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(tc.data); err != nil {
				t.Fatal(err)
			}
			src = f
		}
		sw := &statusWriter{}
		rec := &pieceRecorder{ResponseRecorder: httptest.NewRecorder(), sw: sw}
		sw.ResponseWriter = rec
		lr := &io.LimitedReader{R: src, N: tc.limit}
		n, err := sw.ReadFrom(lr)
		if n != tc.data || err != nil || sw.bytes.Load() != tc.data {
			t.Errorf("%d of %d (file %v): ReadFrom = %d, %v; counted %d", tc.data, tc.limit, tc.file, n, err, sw.bytes.Load())
		}
		if !slices.Equal(rec.counts, tc.counts) {
			t.Errorf("%d of %d (file %v): counts at each piece %v, want %v", tc.data, tc.limit, tc.file, rec.counts, tc.counts)
		}
	}
}

// The registry lists what is in flight, oldest first, with its rate, and
// forgets what was removed.
func TestTransfersListAndRemove(t *testing.T) {
	var ts transfers
	now := time.Now()
	var a, b statusWriter
	a.bytes.Store(4000)
	ka := ts.add(&liveTransfer{id: "a", method: "GET", path: "/x", caller: "token", start: now.Add(-2 * time.Second), bytes: &a.bytes})
	ts.add(&liveTransfer{id: "b", method: "GET", path: "/y", caller: "anonymous", start: now.Add(-time.Second), bytes: &b.bytes})
	got := ts.list(now)
	if len(got) != 2 || got[0].ID != "a" || got[0].Bytes != 4000 || got[0].BytesPerSecond != 2000 || got[1].Caller != "anonymous" {
		t.Fatalf("list = %+v", got)
	}
	ts.remove(ka)
	if got := ts.list(now); len(got) != 1 || got[0].ID != "b" {
		t.Errorf("after remove: %+v", got)
	}
}
