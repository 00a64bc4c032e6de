package hubtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"testing"
)

// parts parses a multipart/byteranges answer into its parts' Content-Range
// values and bytes.
func parts(t *testing.T, resp *http.Response, body []byte) (ranges []string, data [][]byte) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" || params["boundary"] == "" {
		t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			return ranges, data
		}
		if err != nil {
			t.Fatalf("part %d: %v", len(ranges), err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatalf("part %d: %v", len(ranges), err)
		}
		if p.Header.Get("Content-Type") != "binary/octet-stream" {
			t.Errorf("part %d typed %q, want the file's type", len(ranges), p.Header.Get("Content-Type"))
		}
		ranges, data = append(ranges, p.Header.Get("Content-Range")), append(data, b)
	}
}

// Several ascending ranges get a 206 multipart/byteranges of exactly those
// ranges; the counters keep the file's bytes and the framing apart.
func TestMultipartRanges(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	n := len(f.weights)
	url := cdnURL(t, h, "model.safetensors")
	h.ResetCounters()

	resp, body := do(t, "GET", url, fmt.Sprintf("Range: bytes=0-1, 5-6,100-,%d-", n+10))
	wantStatus(t, resp, 206)
	wantHeader(t, resp, "Content-Range", "")
	wantHeader(t, resp, "Content-Length", strconv.Itoa(len(body)))
	got, data := parts(t, resp, body)
	size := strconv.Itoa(n)
	want := []string{"bytes 0-1/" + size, "bytes 5-6/" + size, "bytes 100-" + strconv.Itoa(n-1) + "/" + size}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("parts %q, want %q (the range past the end dropped)", got, want)
	}
	content := 0
	for i, w := range [][]byte{f.weights[0:2], f.weights[5:7], f.weights[100:]} {
		content += len(w)
		if !bytes.Equal(data[i], w) {
			t.Errorf("part %d: wrong bytes", i)
		}
	}
	c := h.Counters()
	if c.BodyBytes != int64(content) || c.BytesByPath["acme/model/model.safetensors"] != int64(content) || c.FramingBytes != int64(len(body)-content) {
		t.Errorf("BodyBytes %d, FramingBytes %d, BytesByPath %v; want %d content of a %d-byte answer",
			c.BodyBytes, c.FramingBytes, c.BytesByPath, content, len(body))
	}
	if log := h.Requests(); len(log) != 1 || log[0].Bytes != int64(len(body)) || log[0].Status != 206 {
		t.Errorf("request log %+v", log)
	}

	// What is not an ascending set of separate ranges is served whole; a set
	// with one satisfiable range is a plain 206; none satisfiable is a 416.
	for _, tc := range []struct {
		spec         string
		status       int
		contentRange string
		body         []byte
	}{
		{"bytes=5-6,0-1", 200, "", f.weights},
		{"bytes=0-5,5-6", 200, "", f.weights},
		{"bytes=0-1,-5", 200, "", f.weights},
		{"bytes=0-1,x", 200, "", f.weights},
		{fmt.Sprintf("bytes=%d-,0-1", n), 200, "", f.weights},
		{fmt.Sprintf("bytes=3-4,%d-", n), 206, "bytes 3-4/" + size, f.weights[3:5]},
		{fmt.Sprintf("bytes=%d-,%d-", n, n+5), 416, "bytes */" + size, nil},
	} {
		resp, body := do(t, "GET", url, "Range: "+tc.spec)
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Range") != tc.contentRange || !bytes.Equal(body, tc.body) {
			t.Errorf("%s: %d %q, %d bytes; want %d %q, %d bytes", tc.spec, resp.StatusCode, resp.Header.Get("Content-Range"), len(body), tc.status, tc.contentRange, len(tc.body))
		}
	}
	// HEAD describes the multipart answer without sending it.
	resp, body = do(t, "HEAD", url, "Range: bytes=0-1,5-6")
	wantStatus(t, resp, 206)
	if len(body) != 0 || resp.Header.Get("Content-Length") == "" {
		t.Errorf("HEAD: %d bytes, Content-Length %q", len(body), resp.Header.Get("Content-Length"))
	}
}

// SingleRanges keeps the old behaviour: several ranges get the whole file.
func TestSingleRangesIgnoresMultiRange(t *testing.T) {
	h := NewT(t, Options{SingleRanges: true})
	f := addFixture(t, h)
	url := cdnURL(t, h, "model.safetensors")
	resp, body := do(t, "GET", url, "Range: bytes=0-1,5-6")
	wantStatus(t, resp, 200)
	if !bytes.Equal(body, f.weights) {
		t.Error("body is not the whole file")
	}
	resp, body = do(t, "GET", url, "Range: bytes=5-6")
	wantStatus(t, resp, 206)
	if !bytes.Equal(body, f.weights[5:7]) {
		t.Error("a single range is still served")
	}
}

// Range faults act on multipart answers: WrongContentRange shifts the first
// part (labelled truthfully), IgnoreRange serves the whole file, Truncate
// cuts the answer as a whole.
func TestMultipartFaults(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	n := strconv.Itoa(len(f.weights))
	url := cdnURL(t, h, "model.safetensors")

	h.SetFaults(Faults{WrongContentRange: Fault{N: 1}})
	resp, body := do(t, "GET", url, "Range: bytes=10-19,40-49")
	wantStatus(t, resp, 206)
	got, data := parts(t, resp, body)
	if got[0] != "bytes 11-20/"+n || !bytes.Equal(data[0], f.weights[11:21]) || got[1] != "bytes 40-49/"+n {
		t.Errorf("WrongContentRange: parts %q", got)
	}

	h.SetFaults(Faults{IgnoreRange: Fault{N: 1}})
	resp, body = do(t, "GET", url, "Range: bytes=10-19,40-49")
	if resp.StatusCode != 200 || !bytes.Equal(body, f.weights) {
		t.Errorf("IgnoreRange: %d, %d bytes", resp.StatusCode, len(body))
	}

	h.SetFaults(Faults{Truncate: Fault{N: 1}, CutAt: 70})
	h.ResetCounters()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Range", "bytes=10-19,40-49")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(body) != 70 {
		t.Errorf("Truncate: %d bytes, %v; want 70 and a short body", len(body), err)
	}
	if c := h.Counters(); c.BodyBytes+c.FramingBytes != 70 {
		t.Errorf("Truncate: counted %d + %d bytes, want 70 in all", c.BodyBytes, c.FramingBytes)
	}
}

func TestParseRanges(t *testing.T) {
	for _, tc := range []struct {
		spec       string
		singleOnly bool
		want       string
		err        error
	}{
		{"bytes=0-0", false, "[{0 0}]", nil},
		{"bytes=-3", false, "[{7 9}]", nil},
		{"bytes=0-1,3-4", false, "[{0 1} {3 4}]", nil},
		{"bytes=0-1, 3-,20-30", false, "[{0 1} {3 9}]", nil},
		{"bytes=0-1,3-4", true, "", errBadRange},
		{"bytes=3-4,0-1", false, "", errBadRange},
		{"bytes=0-3,3-4", false, "", errBadRange},
		{"bytes=0-1,-2", false, "", errBadRange},
		{"bytes=0-1,", false, "", errBadRange},
		{"bytes=10-,0-1", false, "", errBadRange},
		{"bytes=10-,12-", false, "", errUnsatisfiable},
	} {
		got, err := parseRanges(tc.spec, 10, tc.singleOnly)
		if !errors.Is(err, tc.err) || (err == nil && fmt.Sprint(got) != tc.want) {
			t.Errorf("parseRanges(%q, %v) = %v, %v; want %s, %v", tc.spec, tc.singleOnly, got, err, tc.want, tc.err)
		}
	}
}
