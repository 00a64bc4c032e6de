package tensor

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/header"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// decodeListing writes c and decodes it as a client does.
func decodeListing(t *testing.T, c *Catalog) Listing {
	t.Helper()
	var b bytes.Buffer
	if _, err := c.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var l Listing
	if err := json.Unmarshal(b.Bytes(), &l); err != nil {
		t.Fatalf("the listing is not JSON: %v", err)
	}
	return l
}

// builtListing is the listing built whole, as List did before it was
// streamed: the reference WriteJSON must match byte for byte.
func builtListing(c *Catalog) *Listing {
	out := &Listing{Repo: c.Repo, Revision: c.Revision, Commit: c.Commit, Index: c.Index,
		Files: make([]ListedFile, 0, len(c.Files)), Tensors: []ListedEntry{}, Totals: c.Totals()}
	for _, f := range c.Files {
		h := f.Header
		out.Files = append(out.Files, ListedFile{Path: f.Path, ETag: f.ETag, Size: f.Size, HeaderLength: h.HeaderLen, Metadata: h.Metadata})
		for _, t := range h.Tensors {
			off, n := h.FileRange(t)
			out.Tensors = append(out.Tensors, ListedEntry{Name: t.Name, DType: string(t.DType), Shape: nonNil(t.Shape), File: f.Path, Offset: off, Length: n})
		}
	}
	return out
}

// headerFile is the first 8+N bytes of a file with header js, and a size
// of 8+N+data.
func headerFile(js string, data int64) ([]byte, int64) {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	b = append(b, js...)
	return b, int64(len(b)) + data
}

func TestCatalogJSONMatchesEncodingJSON(t *testing.T) {
	names := []string{"plain", `q"uote\back`, "<html>&amp;", "ctl\x01\x1f\n\r\t\b\f", "ls\u2028ps\u2029", "ünïcødé ✓ 🙂", "e\u00e2\u0080"}
	var entries []string
	var off uint64
	for i, n := range names {
		q, _ := json.Marshal(n)
		entries = append(entries, fmt.Sprintf(`%s:{"dtype":"F32","shape":[%d,2],"data_offsets":[%d,%d]}`, q, i+1, off, off+uint64(8*(i+1))))
		off += uint64(8 * (i + 1))
	}
	entries = append(entries, fmt.Sprintf(`"scalar":{"dtype":"I64","shape":[],"data_offsets":[%d,%d]}`, off, off+8),
		fmt.Sprintf(`"nib":{"dtype":"F4","shape":[6],"data_offsets":[%d,%d]}`, off+8, off+11))
	js := `{"__metadata__":{"z":"last","a":"<first>","m\u2028":"x\"y"},` + strings.Join(entries, ",") + "}"
	head, size := headerFile(js, int64(off+11))
	h, err := header.Parse(bytes.NewReader(head), size, header.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain, psize := headerFile(`{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1)
	h2, err := header.Parse(bytes.NewReader(plain), psize, header.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Catalog{
		{Repo: "org/model", Revision: "main", Commit: fakeCommit, Index: "model.safetensors.index.json", Files: []File{
			{FileInfo: FileInfo{Path: "a/model-1.safetensors", ETag: `"e1"`, Size: size}, Header: h},
			{FileInfo: FileInfo{Path: "b.safetensors", ETag: "e<2>", Size: psize}, Header: h2},
		}},
		{Repo: "org/model", Revision: "refs/pr/1", Commit: fakeCommit},
	} {
		var got bytes.Buffer
		n, err := c.WriteJSON(&got)
		if err != nil || n != int64(got.Len()) {
			t.Fatalf("WriteJSON: %d, %v (wrote %d)", n, err, got.Len())
		}
		want, err := json.Marshal(builtListing(c))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("streamed listing differs from encoding/json's:\n got %s\nwant %s", got.Bytes(), want)
		}
	}
}

// compactHeader is a header of n tensors of some 87 bytes each, like the
// reported one (49.8 MB for 700,000 tensors), with its file's size.
func compactHeader(n int) ([]byte, int64) {
	var js strings.Builder
	js.WriteString(`{"__metadata__":{"format":"pt"}`)
	var off uint64
	for i := range n {
		fmt.Fprintf(&js, `,"layers.%d.experts.%d.w":{"dtype":"BF16","shape":[1],"data_offsets":[%d,%d]}`, i/512, i%512, off, off+2)
		off += 2
	}
	js.WriteString("}")
	return headerFile(js.String(), int64(off))
}

// measure runs fn and reports the most the heap grew while it ran
// (sampled, so a lower bound, for the report) and what it allocated in all.
func measure(fn func()) (peak, total uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var stop atomic.Bool
	var pk atomic.Uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			pk.Store(max(pk.Load(), m.HeapInuse))
			time.Sleep(time.Millisecond) // sampling only; nothing is timed
		}
	})
	fn()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	stop.Store(true)
	wg.Wait()
	return max(pk.Load(), after.HeapInuse) - min(before.HeapInuse, max(pk.Load(), after.HeapInuse)), after.TotalAlloc - before.TotalAlloc
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TestListingMemory lists a header of 150,000 tensors (12.9 MB: within the
// default limits) and checks that writing the listing allocates far less
// than the JSON it writes: the listing is streamed, not built whole and
// marshalled (which allocated some ten times the JSON's size). It logs the
// parse's and the listing's heap figures, and the built-whole listing's for
// comparison.
func TestListingMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("parses a 13 MB header")
	}
	head, size := compactHeader(150_000)
	g := newGatedFiles(64 << 10)
	g.add("m.safetensors", head, size, false)
	s := New(g, Options{})
	var c *Catalog
	peak, total := measure(func() {
		var err error
		if c, err = s.List(t.Context(), hub.Caller{}, testRef("m.safetensors")); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("parse of a %.1f MB header of %d tensors: heap +%.0f MB at the peak, %.0f MB allocated",
		float64(len(head))/1e6, len(c.Files[0].Header.Tensors), float64(peak)/1e6, float64(total)/1e6)

	var out countWriter
	peak, total = measure(func() {
		if _, err := c.WriteJSON(&out); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("streamed listing: %.1f MB of JSON; heap +%.2f MB at the peak, %.3f MB allocated", float64(out.n)/1e6, float64(peak)/1e6, float64(total)/1e6)
	if total > uint64(out.n)/64 {
		t.Errorf("writing %d bytes of listing allocated %d bytes: it is not streamed", out.n, total)
	}
	var body []byte
	peak, total = measure(func() { body, _ = json.Marshal(builtListing(c)) })
	t.Logf("built whole and marshalled (as before): %.1f MB of JSON; heap +%.0f MB at the peak, %.0f MB allocated", float64(len(body))/1e6, float64(peak)/1e6, float64(total)/1e6)
}
