package hubtest

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cdnURL resolves path's CDN location through the hub, as a client would.
func cdnURL(t *testing.T, h *Hub, path string) string {
	t.Helper()
	resp, _ := do(t, "HEAD", h.URL+"/acme/model/resolve/main/"+path)
	wantStatus(t, resp, 302)
	return resp.Header.Get("Location")
}

func TestCDNHeaders(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	resp, body := do(t, "GET", cdnURL(t, h, "model.safetensors"))
	wantStatus(t, resp, 200)
	if !bytes.Equal(body, f.weights) {
		t.Fatal("body differs")
	}
	etag := resp.Header.Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]{64}"$`).MatchString(etag) || strings.Contains(etag, refSHA256(f.weights)) {
		t.Errorf("CDN ETag %q must be a quoted 64-hex value other than the sha256", etag)
	}
	wantHeader(t, resp, "Accept-Ranges", "bytes")
	wantHeader(t, resp, "Cache-Control", "public, max-age=31536000")
	wantHeader(t, resp, "Content-Disposition", `inline; filename*=UTF-8''model.safetensors; filename="model.safetensors"`)
	wantHeader(t, resp, "X-Cache", "Hit from cloudfront")
}

func TestCDNRefusals(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	good := cdnURL(t, h, "model.safetensors")
	sig := regexp.MustCompile(`X-Amz-Signature=([0-9a-f]+)`).FindStringSubmatch(good)[1]
	flipped := strings.Replace(good, sig, strings.Repeat("0", len(sig)), 1)
	otherBlob := strings.Replace(good, refSHA256(f.weights), strings.Repeat("ab", 32), 1)
	noSig := good[:strings.Index(good, "&X-Amz-Signature")]
	expired := h.signer.url(h.CDNURL, refSHA256(f.weights), "acme/model/model.safetensors", -time.Minute)

	for _, tc := range []struct {
		name, url, auth, code string
		status                int
	}{
		{"bad signature", flipped, "", "AccessDenied", 403},
		{"signature for another blob", otherBlob, "", "AccessDenied", 403},
		{"no signature", noSig, "", "AccessDenied", 403},
		{"expired", expired, "", "AccessDenied", 403},
		{"authorization", good, "Authorization: Bearer hf_secret", "InvalidArgument", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.auth != "" {
				hdr = append(hdr, tc.auth)
			}
			resp, body := do(t, "GET", tc.url, hdr...)
			wantStatus(t, resp, tc.status)
			if !bytes.Contains(body, []byte("<Code>"+tc.code+"</Code>")) {
				t.Errorf("body %q", body)
			}
		})
	}
	if got := h.Counters().AuthSeenByCDN; got != 1 {
		t.Errorf("AuthSeenByCDN = %d, want 1", got)
	}
	resp, _ := do(t, "GET", good)
	wantStatus(t, resp, 200)
	h.ExpireURLs()
	resp, _ = do(t, "GET", good)
	wantStatus(t, resp, 403)
	resp, _ = do(t, "GET", cdnURL(t, h, "model.safetensors"))
	wantStatus(t, resp, 200)
}

func TestRanges(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	h.AddRepo(RepoSpec{ID: "acme/empty", Files: []File{{Path: "e.bin", Data: []byte{}}}})
	n := int64(len(f.weights))
	size := strconv.FormatInt(n, 10)
	url := cdnURL(t, h, "model.safetensors")
	for _, tc := range []struct {
		rng          string
		status       int
		contentRange string
		from, to     int64 // expected body f.weights[from:to]
	}{
		{"bytes=0-0", 206, "bytes 0-0/" + size, 0, 1},
		{"bytes=0-7", 206, "bytes 0-7/" + size, 0, 8},
		{"bytes=100-", 206, "bytes 100-" + strconv.FormatInt(n-1, 10) + "/" + size, 100, n},
		{"bytes=-10", 206, "bytes " + strconv.FormatInt(n-10, 10) + "-" + strconv.FormatInt(n-1, 10) + "/" + size, n - 10, n},
		{"bytes=10-999999999", 206, "bytes 10-" + strconv.FormatInt(n-1, 10) + "/" + size, 10, n},
		{"bytes=" + size + "-", 416, "bytes */" + size, 0, 0},
		{"bytes=" + size + "-" + strconv.FormatInt(n+5, 10), 416, "bytes */" + size, 0, 0},
		{"bytes=5-6,0-1", 200, "", 0, n}, // several ranges out of order: ignored (multirange_test.go has the rest)
		{"items=0-1", 200, "", 0, n},
	} {
		resp, body := do(t, "GET", url, "Range: "+tc.rng)
		wantStatus(t, resp, tc.status)
		wantHeader(t, resp, "Content-Range", tc.contentRange)
		if !bytes.Equal(body, f.weights[tc.from:tc.to]) {
			t.Errorf("%s: %d bytes, want [%d:%d]", tc.rng, len(body), tc.from, tc.to)
		}
		wantHeader(t, resp, "Content-Length", strconv.Itoa(len(body)))
	}
	// A zero-byte file has no satisfiable range, not even the JS probe.
	resp, _ := do(t, "HEAD", h.URL+"/acme/empty/resolve/main/e.bin")
	resp, body := do(t, "GET", resp.Header.Get("Location"), "Range: bytes=0-0")
	wantStatus(t, resp, 416)
	wantHeader(t, resp, "Content-Range", "bytes */0")
	if len(body) != 0 {
		t.Errorf("416 body %q", body)
	}
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		spec       string
		size       int64
		start, end int64
		err        error
	}{
		{"bytes=0-0", 10, 0, 0, nil},
		{"bytes=3-", 10, 3, 9, nil},
		{"bytes=-3", 10, 7, 9, nil},
		{"bytes=-30", 10, 0, 9, nil},
		{"bytes=2-100", 10, 2, 9, nil},
		{"bytes=10-", 10, 0, 0, errUnsatisfiable},
		{"bytes=-0", 10, 0, 0, errUnsatisfiable},
		{"bytes=0-0", 0, 0, 0, errUnsatisfiable},
		{"bytes=5-2", 10, 0, 0, errBadRange},
		{"bytes=a-b", 10, 0, 0, errBadRange},
		{"bytes=1-2,4-5", 10, 0, 0, errBadRange},
		{"bytes=-", 10, 0, 0, errBadRange},
		{"bytes 1-2", 10, 0, 0, errBadRange},
		{"bytes=--1", 10, 0, 0, errBadRange},
	} {
		s, e, err := parseRange(tc.spec, tc.size)
		if !errors.Is(err, tc.err) || (err == nil && (s != tc.start || e != tc.end)) {
			t.Errorf("parseRange(%q, %d) = %d, %d, %v; want %d, %d, %v", tc.spec, tc.size, s, e, err, tc.start, tc.end, tc.err)
		}
	}
}

// With CDNOnHub, LFS redirects stay on the hub's host, whose blob route
// accepts the hub token and refuses expired links with 403.
func TestCDNOnHub(t *testing.T) {
	h := NewT(t, Options{CDNOnHub: true})
	data := RandomBytes(7, 3000)
	h.AddRepo(RepoSpec{ID: "acme/cdn", Files: []File{{Path: "w.safetensors", Data: data}}})
	resp, _ := do(t, "HEAD", h.URL+"/acme/cdn/resolve/main/w.safetensors")
	wantStatus(t, resp, 302)
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, h.URL+"/cdn/blobs/") {
		t.Fatalf("Location = %q, want the hub's own /cdn/", loc)
	}
	resp, body := do(t, "GET", loc, "Authorization: Bearer hf_x", "Range: bytes=10-19")
	wantStatus(t, resp, 206)
	if string(body) != string(data[10:20]) {
		t.Fatalf("body = %x", body)
	}
	h.ExpireURLs()
	resp, _ = do(t, "GET", loc, "Range: bytes=10-19")
	wantStatus(t, resp, 403)
}
