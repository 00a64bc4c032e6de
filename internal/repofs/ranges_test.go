package repofs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// multiFake is fakeUpstream that also answers GetRanges: with the ranges'
// bytes, or (refuse) as an upstream that ignores multi-range requests. It
// counts requests and bytes of both kinds, and records any call that breaks
// GetRanges' contract.
type multiFake struct {
	*fakeUpstream
	refuse bool
	cut    bool // multipart bodies end early

	mu          sync.Mutex
	multi       [][]fetch.Range
	singles     int
	bytes       int64
	broken      []string
	multiWanted []fetch.Want
}

func (u *multiFake) GetRange(ctx context.Context, url, auth string, want fetch.Want, off, n int64) (io.ReadCloser, error) {
	body, err := u.fakeUpstream.GetRange(ctx, url, auth, want, off, n)
	if err == nil {
		u.mu.Lock()
		u.singles++
		u.bytes += n
		u.mu.Unlock()
	}
	return body, err
}

func (u *multiFake) GetRanges(ctx context.Context, url, auth string, want fetch.Want, ranges []fetch.Range) (io.ReadCloser, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.multi = append(u.multi, ranges)
	u.multiWanted = append(u.multiWanted, want)
	if len(ranges) < 2 || len(ranges) > fetch.MaxRanges {
		u.broken = append(u.broken, fmt.Sprintf("%d ranges", len(ranges)))
	}
	end := int64(-1)
	for _, r := range ranges {
		if r.Off <= end || r.Len < 1 || r.Off+r.Len > int64(len(u.data)) {
			u.broken = append(u.broken, fmt.Sprintf("range %+v after %d", r, end))
			return nil, errors.New("bad ranges")
		}
		end = r.Off + r.Len
	}
	u.fakeUpstream.mu.Lock()
	expired := u.expired[url]
	u.fakeUpstream.mu.Unlock()
	switch {
	case expired:
		return nil, fmt.Errorf("cdn 403: %w", fetch.ErrExpired)
	case u.refuse:
		return nil, fmt.Errorf("status 200: %w", fetch.ErrNotMultipart)
	}
	var b []byte
	for _, r := range ranges {
		b = append(b, u.data[r.Off:r.Off+r.Len]...)
	}
	u.bytes += int64(len(b))
	if u.cut {
		return io.NopCloser(io.MultiReader(bytes.NewReader(b[:len(b)/2]), iotest{io.ErrUnexpectedEOF})), nil
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// iotest is a reader that fails with err.
type iotest struct{ err error }

func (r iotest) Read([]byte) (int, error) { return 0, r.err }

func (u *multiFake) counts() (multi, singles int, n int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.multi), u.singles, u.bytes
}

func (u *multiFake) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.multi, u.singles, u.bytes = nil, 0, 0
}

// newMultiFS is newFS over a multiFake.
func newMultiFS(t *testing.T, data []byte, refuse bool) (*FS, *fakeResolver, *multiFake) {
	t.Helper()
	store, err := cache.Open(cache.Options{Dir: t.TempDir(), BlockSize: 4096, ChunkSize: 16384})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	res := &fakeResolver{meta: resolver.Meta{FileMeta: fetch.FileMeta{Commit: commit, ETag: sha(data), Size: int64(len(data))}}}
	up := &multiFake{fakeUpstream: &fakeUpstream{data: data, expired: map[string]bool{}}, refuse: refuse}
	t.Cleanup(func() {
		if len(up.broken) > 0 {
			t.Errorf("GetRanges called against its contract: %v", up.broken)
		}
	})
	return New(res, store, up, Options{}), res, up
}

// strided is n ranges of size bytes every stride bytes from off: a column
// shard's pieces, one per row.
func strided(off, n, size, stride int64) (bufs [][]byte, offs []int64, total int64) {
	for i := range n {
		bufs = append(bufs, make([]byte, size))
		offs = append(offs, off+i*stride)
		total += size
	}
	return bufs, offs, total
}

func checkBytes(t *testing.T, data []byte, bufs [][]byte, offs []int64) {
	t.Helper()
	for i, b := range bufs {
		if !bytes.Equal(b, data[offs[i]:offs[i]+int64(len(b))]) {
			t.Fatalf("range %d (%d+%d): wrong bytes", i, offs[i], len(b))
		}
	}
}

// A sparse read costs its own bytes upstream, in multipart requests of at
// most fetch.MaxRanges ranges, and counts them in the request's tally.
func TestReadRangesFetchesOnlyTheRanges(t *testing.T) {
	data := pattern(4 << 20)
	fs, _, up := newMultiFS(t, data, false)
	tally := &cache.Tally{}
	f, err := fs.Open(cache.WithTally(context.Background(), tally), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// 300 ranges of 512 bytes, 8 KiB apart: every 4 KiB block is touched
	// by none or one, so block fills would cost 8 times as much.
	bufs, offs, total := strided(1000, 300, 512, 8<<10)
	if err := f.ReadRanges(bufs, offs); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, data, bufs, offs)
	multi, singles, n := up.counts()
	t.Logf("%d bytes in %d ranges: %d multipart and %d single requests, %d bytes", total, len(bufs), multi, singles, n)
	if n != total || multi != 5 || singles != 0 {
		t.Errorf("%d multipart and %d single requests, %d bytes; want 5 (300 ranges at 64 a request), 0, %d", multi, singles, n, total)
	}
	if tally.Bytes() != n {
		t.Errorf("tally %d, want %d", tally.Bytes(), n)
	}
	for _, w := range up.multiWanted {
		if w.Size != int64(len(data)) || w.ETag != sha(data) {
			t.Errorf("a request wanted %+v", w)
		}
	}
	// Nothing went into the cache: a piece of a block cannot be recorded.
	if p := f.Present(0, f.Size()); p != 0 {
		t.Errorf("%d bytes cached", p)
	}
}

// Gaps are fetched when that is cheaper than another part (up to freeGap),
// and the smallest ones up to maxGap within a quarter of the bytes asked.
func TestCoalesce(t *testing.T) {
	mk := func(spec ...int64) []asked {
		var ws []asked
		for i := 0; i < len(spec); i += 2 {
			ws = append(ws, asked{off: spec[i], buf: make([]byte, spec[i+1])})
		}
		return ws
	}
	for _, tc := range []struct {
		name string
		in   []asked
		want string
	}{
		{"apart", mk(0, 1000, 10000, 1000), "[0-1000 10000-11000]"},
		{"tiny gap", mk(0, 10, 100, 10), "[0-110]"},
		{"overlap and order", mk(500, 100, 0, 550, 520, 10), "[0-600]"},
		// Gaps of 300, 200 and 600 for 4000 bytes asked: a budget of 1000
		// takes 200 and 300, not 600.
		{"budget", mk(0, 1000, 1300, 1000, 2500, 1000, 4100, 1000), "[0-3500 4100-5100]"},
		{"gap over maxGap", mk(0, 100000, 100000+maxGap+1, 100000), "[0-100000 104097-204097]"},
	} {
		var got []string
		for _, s := range coalesce(tc.in) {
			got = append(got, fmt.Sprintf("%d-%d", s.off, s.end))
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, got, tc.want)
		}
	}
}

// Overlapping, unordered and empty ranges all get their bytes.
func TestReadRangesAnyOrder(t *testing.T) {
	data := pattern(200000)
	fs, _, _ := newMultiFS(t, data, false)
	f, err := fs.Open(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	offs := []int64{150000, 10, 100, 150010, 90000, 5, 199990}
	bufs := [][]byte{make([]byte, 40), make([]byte, 200), make([]byte, 0), make([]byte, 4), make([]byte, 7000), make([]byte, 3), make([]byte, 10)}
	if err := f.ReadRanges(bufs, offs); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, data, bufs, offs)
	if err := f.ReadRanges([][]byte{make([]byte, 11)}, []int64{199990}); err == nil {
		t.Error("a range past the end was read")
	}
}

// An upstream that answers multi-range requests with the whole file is
// asked once, alone; the rest go as single ranges, and the next read of any
// file of the FS from that host asks single ranges straight away.
func TestReadRangesFallsBackToSingleRanges(t *testing.T) {
	data := pattern(4 << 20)
	fs, _, up := newMultiFS(t, data, true)
	bufs, offs, total := strided(1000, 300, 512, 8<<10)
	for i := range 2 {
		up.reset()
		f, err := fs.Open(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
		if err != nil {
			t.Fatal(err)
		}
		err = f.ReadRanges(bufs, offs)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		checkBytes(t, data, bufs, offs)
		multi, singles, n := up.counts()
		t.Logf("read %d: %d multipart and %d single requests, %d bytes", i+1, multi, singles, n)
		if wantMulti := 1 - i; multi != wantMulti || singles != 300 || n != total {
			t.Errorf("read %d: %d multipart and %d single requests, %d bytes; want %d, 300, %d", i+1, multi, singles, n, wantMulti, total)
		}
	}
}

// What the cache holds is read from it: a warm read costs nothing upstream,
// a partly warm one only what is missing.
func TestReadRangesReadsTheCacheFirst(t *testing.T) {
	data := pattern(4 << 20)
	fs, _, up := newMultiFS(t, data, false)
	f, err := fs.Open(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The first half of the file, through the cache.
	if _, err := f.ReadAt(make([]byte, 512<<10), 0); err != nil {
		t.Fatal(err)
	}
	up.reset()
	bufs, offs, _ := strided(1000, 60, 512, 8<<10) // all in the first half
	if err := f.ReadRanges(bufs, offs); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, data, bufs, offs)
	if multi, singles, n := up.counts(); multi+singles != 0 || n != 0 {
		t.Errorf("warm read: %d requests, %d bytes upstream", multi+singles, n)
	}
	bufs, offs, _ = strided(1000, 120, 512, 8<<10) // the first 64 cached
	if err := f.ReadRanges(bufs, offs); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, data, bufs, offs)
	if _, _, n := up.counts(); n != 56*512 {
		t.Errorf("half-warm read: %d bytes upstream, want %d", n, 56*512)
	}
}

// A refused download URL is resolved again, at the commit, once.
func TestReadRangesRefreshesARefusedURL(t *testing.T) {
	data := pattern(4 << 20)
	fs, res, up := newMultiFS(t, data, false)
	f, err := fs.Open(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	up.expired["https://cdn/1"] = true
	bufs, offs, _ := strided(0, 10, 100, 10000)
	if err := f.ReadRanges(bufs, offs); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, data, bufs, offs)
	if res.resolves != 2 || res.revs[1] != commit {
		t.Errorf("resolves %v, want the second at the commit", res.revs)
	}
}

// A multipart body that fails part-way fails the read.
func TestReadRangesFailsOnABrokenAnswer(t *testing.T) {
	data := pattern(4 << 20)
	fs, _, up := newMultiFS(t, data, false)
	up.cut = true
	f, err := fs.Open(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bufs, offs, _ := strided(0, 200, 100, 10000)
	if err := f.ReadRanges(bufs, offs); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
	}
}
