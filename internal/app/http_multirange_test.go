package app_test

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// oneByteRanges is a Range header of n one-byte ranges, stride apart.
func oneByteRanges(n int, stride int64) string {
	specs := make([]string, n)
	for i := range specs {
		specs[i] = fmt.Sprintf("%d-%d", int64(i)*stride, int64(i)*stride)
	}
	return "bytes=" + strings.Join(specs, ",")
}

// multipartParts reads a multipart/byteranges answer: each part's
// Content-Range and bytes.
func multipartParts(t *testing.T, resp *http.Response, body []byte) (ranges []string, parts [][]byte) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" {
		t.Fatalf("Content-Type %q, want multipart/byteranges", resp.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return ranges, parts
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		ranges = append(ranges, p.Header.Get("Content-Range"))
		parts = append(parts, b)
	}
}

// coldFile puts a 64 MiB file in the fake hub, not yet in the cache.
func coldFile(t *testing.T, e *env) []byte {
	t.Helper()
	data := hubtest.RandomBytes(64, 64<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "big.bin", Data: data, LFS: lfs()}}})
	e.Hub.ResetCounters()
	return data
}

// The reported amplification: one request of 1,024 one-byte ranges, 64 KiB
// apart, on a cold 64 MiB file fetched every block of it (64 MiB upstream
// for a 100 KiB answer). More ranges than hubproxy serves for a file it
// does not hold whole are refused with 416, a Content-Range total and a
// message, and cost nothing upstream.
func TestManyRangesOfAColdFileAreRefused(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := coldFile(t, e)
	resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/big.bin", "Range", oneByteRanges(1024, 64<<10))
	_, up := cdnStats(e.Hub, "big.bin")
	t.Logf("1,024 one-byte ranges: %d, %d body bytes, %d bytes upstream; %q", resp.StatusCode, len(body), up, resp.Header.Get("X-Error-Message"))
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable ||
		resp.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", len(data)) ||
		!strings.Contains(resp.Header.Get("X-Error-Message"), "at most 16") {
		t.Errorf("%d, Content-Range %q, message %q; want 416 bytes */%d saying the limit", resp.StatusCode,
			resp.Header.Get("Content-Range"), resp.Header.Get("X-Error-Message"), len(data))
	}
	if up != 0 {
		t.Errorf("a refused request fetched %d bytes upstream", up)
	}
	// 17 is one too many; the tensor routes follow the same rule.
	if resp, _ := e.Do(http.MethodGet, "/org/model/resolve/main/big.bin", "Range", oneByteRanges(17, 1<<20)); resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("17 ranges: %d, want 416", resp.StatusCode)
	}
	if _, up := cdnStats(e.Hub, "big.bin"); up != 0 {
		t.Errorf("17 refused ranges fetched %d bytes upstream", up)
	}
}

// Up to the limit, a cold file's ranges are served as multipart, each part
// costing at most the cache blocks it touches: 16 one-byte ranges, 4 MiB
// apart, fetch 16 blocks (1 MiB), not the file.
func TestRangesUpToTheLimitCostTheirBlocks(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := coldFile(t, e)
	const stride = 4 << 20
	resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/big.bin", "Range", oneByteRanges(16, stride))
	if resp.StatusCode != http.StatusPartialContent {
		t.Fatalf("16 ranges: %d %.200s", resp.StatusCode, body)
	}
	ranges, parts := multipartParts(t, resp, body)
	if len(parts) != 16 {
		t.Fatalf("%d parts, want 16", len(parts))
	}
	for i, p := range parts {
		off := int64(i) * stride
		if want := fmt.Sprintf("bytes %d-%d/%d", off, off, len(data)); ranges[i] != want || !bytes.Equal(p, data[off:off+1]) {
			t.Errorf("part %d: %q %x, want %q %x", i, ranges[i], p, want, data[off:off+1])
		}
	}
	_, up := cdnStats(e.Hub, "big.bin")
	limit := int64(16 * blockSize)
	t.Logf("16 one-byte ranges of a cold 64 MiB file: %d bytes upstream (limit %d)", up, limit)
	if up > limit {
		t.Errorf("16 one-byte ranges fetched %d bytes upstream, more than their %d bytes of blocks", up, limit)
	}
}

// Overlapping and adjacent ranges are coalesced (RFC 9110 §14.2): each
// byte is served once, parts in the order of their first range.
func TestOverlappingRangesAreCoalesced(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := hubtest.RandomBytes(9, 256<<10)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "w.bin", Data: data, LFS: lfs()}}})
	resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/w.bin", "Range", "bytes=5000-5099,100-199,150-299,300-399,-10,5050-5060")
	if resp.StatusCode != http.StatusPartialContent {
		t.Fatalf("%d %.200s", resp.StatusCode, body)
	}
	ranges, parts := multipartParts(t, resp, body)
	size := len(data)
	want := []struct{ a, b int }{{5000, 5099}, {100, 399}, {size - 10, size - 1}}
	if len(parts) != len(want) {
		t.Fatalf("parts %q, want %v", ranges, want)
	}
	for i, w := range want {
		if ranges[i] != fmt.Sprintf("bytes %d-%d/%d", w.a, w.b, size) || !bytes.Equal(parts[i], data[w.a:w.b+1]) {
			t.Errorf("part %d: %q, want bytes %d-%d", i, ranges[i], w.a, w.b)
		}
	}
	// Ranges that coalesce into one are a single-range answer.
	resp, body = e.Do(http.MethodGet, "/org/model/resolve/main/w.bin", "Range", "bytes=0-9,10-19,5-14")
	if resp.StatusCode != http.StatusPartialContent || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 0-19/%d", size) || !bytes.Equal(body, data[:20]) {
		t.Errorf("three touching ranges: %d %q", resp.StatusCode, resp.Header.Get("Content-Range"))
	}
}

// Past the limit, a file held whole is answered as nginx answers past
// max_ranges: 200 and the whole file, which costs nothing upstream.
func TestManyRangesOfACompleteFileGetTheWholeFile(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := hubtest.RandomBytes(10, 1<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "w.bin", Data: data, LFS: lfs()}}})
	if resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/w.bin"); resp.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Fatalf("whole download: %d", resp.StatusCode)
	}
	e.Hub.ResetCounters()
	resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/w.bin", "Range", oneByteRanges(1024, 1<<10))
	if resp.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Errorf("1,024 ranges of a cached file: %d, %d bytes; want 200 and the file", resp.StatusCode, len(body))
	}
	if _, up := cdnStats(e.Hub, "w.bin"); up != 0 {
		t.Errorf("%d bytes upstream for a cached file", up)
	}
}

// The tensor routes follow the same rule: a cold tensor's bytes are not
// served in more than 16 ranges.
func TestManyRangesOfAColdTensorAreRefused(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	bigModel(t, e)
	e.Do(http.MethodGet, "/models/org/model/tensors") // the header only
	e.Hub.ResetCounters()
	resp, _ := e.Do(http.MethodGet, "/models/org/model/tensors/b.weight", "Range", oneByteRanges(1024, 64<<10))
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", 4096*4096*4) {
		t.Errorf("1,024 ranges of a cold tensor: %d, Content-Range %q", resp.StatusCode, resp.Header.Get("Content-Range"))
	}
	if _, up := cdnStats(e.Hub, "model.safetensors"); up != 0 {
		t.Errorf("a refused request fetched %d bytes upstream", up)
	}
}
