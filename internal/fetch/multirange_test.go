package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// asked is the ranges most multi-range tests ask of blob.
var asked = []Range{{10, 5}, {100, 50}, {990, 10}}

// concat is what GetRanges must yield for ranges of blob.
func concat(ranges []Range) []byte {
	var b []byte
	for _, r := range ranges {
		b = append(b, blob[r.Off:r.Off+r.Len]...)
	}
	return b
}

// readRanges is GetRanges plus io.ReadAll.
func readRanges(c *Client, rawURL string, want Want, ranges []Range) ([]byte, error) {
	rc, err := c.GetRanges(context.Background(), rawURL, "", want, ranges)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// fakePart is one part a hand-built multipart answer carries.
type fakePart struct {
	contentRange string
	data         []byte
	extra        string // more part header lines, each ending in CRLF
}

func part(off, n int64) fakePart {
	return fakePart{contentRange: fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, len(blob)), data: blob[off : off+n]}
}

// honest is the right answer to asked, part by part.
func honest() []fakePart {
	var ps []fakePart
	for _, r := range asked {
		ps = append(ps, part(r.Off, r.Len))
	}
	return ps
}

// multipartBody frames parts with boundary, closing it when closing is set.
func multipartBody(boundary string, parts []fakePart, closing bool) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		fmt.Fprintf(&b, "\r\n--%s\r\nContent-Type: application/octet-stream\r\n%s", boundary, p.extra)
		if p.contentRange != "" {
			fmt.Fprintf(&b, "Content-Range: %s\r\n", p.contentRange)
		}
		b.WriteString("\r\n")
		b.Write(p.data)
	}
	if closing {
		fmt.Fprintf(&b, "\r\n--%s--\r\n", boundary)
	}
	return b.Bytes()
}

// answer serves a fixed multipart answer declaring boundary declared.
func answer(declared string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "multipart/byteranges; boundary="+declared)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(body)
	}
}

func TestGetRangesExactBytes(t *testing.T) {
	cdn := newServer(t, serveBlob) // http.ServeContent answers multipart
	c := newClient(t, "https://hub.invalid", nil)
	got, err := readRanges(c, cdn.URL+"/blob?sig=SIGNATURE", Want{Size: int64(len(blob))}, asked)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, concat(asked)) {
		t.Fatal("wrong bytes")
	}
	h := cdn.Hits()[0]
	if h.Header.Get("Range") != "bytes=10-14,100-149,990-999" || h.Header.Get("Accept-Encoding") != "identity" {
		t.Fatalf("request headers %v", h.Header)
	}
	// io.ReadFull of exactly the total succeeds: the last Read ends the body.
	rc, err := c.GetRanges(context.Background(), cdn.URL+"/blob", "", Want{}, asked)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, len(concat(asked)))
	if _, err := io.ReadFull(rc, buf); err != nil || !bytes.Equal(buf, concat(asked)) {
		t.Fatalf("ReadFull: %v", err)
	}
	if n, err := rc.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read past the end: %d, %v", n, err)
	}
}

// A server that ignores multi-range (200, the whole file) or answers one
// range is not read at all, and says so with ErrNotMultipart.
func TestGetRangesNotMultipart(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"200 whole file": func(w http.ResponseWriter, r *http.Request) { w.Write(blob) },
		"single 206": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", "bytes 10-14/1000")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(blob[10:15])
		},
	} {
		t.Run(name, func(t *testing.T) {
			cdn := newServer(t, h)
			c := newClient(t, "https://hub.invalid", nil)
			rc, err := c.GetRanges(context.Background(), cdn.URL+"/blob?sig=SIGNATURE", "", Want{}, asked)
			if rc != nil {
				rc.Close()
				t.Fatal("a body was returned")
			}
			if !errors.Is(err, ErrNotMultipart) {
				t.Fatalf("err = %v, want ErrNotMultipart", err)
			}
			noSecrets(t, err)
		})
	}
}

// Every way a multipart answer can lie or break is an error, and what was
// handed out before it is a prefix of the right bytes: never a wrong byte,
// and never the last byte of a broken answer.
func TestGetRangesRejectsLyingAnswers(t *testing.T) {
	const bnd = "BOUNDARY0123"
	shifted := honest()
	shifted[1] = part(101, 50) // truthfully labelled, but not what was asked
	swapped := honest()
	swapped[0], swapped[1] = swapped[1], swapped[0]
	short := honest()
	short[1].data = short[1].data[:49]
	long := honest()
	long[1].data = blob[100:151]
	otherTotal := honest()
	otherTotal[1].contentRange = "bytes 100-149/2000"
	unlabelled := honest()
	unlabelled[2].contentRange = ""
	encoded := honest()
	encoded[1].extra = "Content-Transfer-Encoding: base64\r\n"
	full := multipartBody(bnd, honest(), true)

	cases := []struct {
		name string
		h    http.HandlerFunc
		is   error // what the error must match, if anything in particular
	}{
		{"wrong part range", answer(bnd, multipartBody(bnd, shifted, true)), nil},
		{"parts out of order", answer(bnd, multipartBody(bnd, swapped, true)), nil},
		{"missing part", answer(bnd, multipartBody(bnd, honest()[:2], true)), nil},
		{"extra part", answer(bnd, multipartBody(bnd, append(honest(), part(500, 3)), true)), nil},
		{"short part", answer(bnd, multipartBody(bnd, short, true)), io.ErrUnexpectedEOF},
		{"long part", answer(bnd, multipartBody(bnd, long, true)), ErrLongBody},
		{"other total", answer(bnd, multipartBody(bnd, otherTotal, true)), nil},
		{"no Content-Range", answer(bnd, multipartBody(bnd, unlabelled, true)), nil},
		{"transfer-encoded part", answer(bnd, multipartBody(bnd, encoded, true)), nil},
		{"no closing boundary", answer(bnd, multipartBody(bnd, honest(), false)), nil},
		{"bad boundary", answer("OTHER", full), nil},
		{"no boundary", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "multipart/byteranges")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(full)
		}, nil},
		{"encoded answer", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			answer(bnd, full)(w, r)
		}, nil},
		{"truncated answer", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "multipart/byteranges; boundary="+bnd)
			w.Header().Set("Content-Length", strconv.Itoa(len(full)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(full[:len(full)-40]) // inside the last part
		}, nil},
	}
	want := concat(asked)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cdn := newServer(t, tc.h)
			c := newClient(t, "https://hub.invalid", nil)
			got, err := readRanges(c, cdn.URL+"/blob?sig=SIGNATURE", Want{Size: int64(len(blob))}, asked)
			if err == nil {
				t.Fatalf("no error; %d bytes read", len(got))
			}
			t.Log(err)
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want %v", err, tc.is)
			}
			if len(got) >= len(want) || !bytes.Equal(got, want[:len(got)]) {
				t.Errorf("%d bytes handed out before %v: not a strict prefix of the right ones", len(got), err)
			}
			noSecrets(t, err)
		})
	}
}

func TestGetRangesBadArguments(t *testing.T) {
	c := newClient(t, "https://hub.invalid", nil)
	many := make([]Range, MaxRanges+1)
	for i := range many {
		many[i] = Range{int64(i * 2), 1}
	}
	for name, rs := range map[string][]Range{
		"one range":   {{0, 1}},
		"too many":    many,
		"overlapping": {{0, 10}, {5, 10}},
		"adjacent":    {{0, 10}, {10, 10}},
		"descending":  {{50, 10}, {0, 10}},
		"empty range": {{0, 10}, {20, 0}},
		"negative":    {{-1, 10}, {20, 1}},
		"past size":   {{0, 10}, {995, 10}},
	} {
		if _, err := c.GetRanges(context.Background(), "https://cdn.invalid/b", "", Want{Size: 1000}, rs); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Credentials go to the upstream only, never to the CDN it redirects to;
// an expired link matches ErrExpired.
func TestGetRangesRedirectsAndExpiry(t *testing.T) {
	cdn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if strings.Contains(r.URL.RawQuery, "expired") {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		serveBlob(w, r)
	})
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, cdn.URL+"/blob?"+r.URL.RawQuery, http.StatusFound)
	})
	c := newClient(t, up.URL, nil)
	got, err := readRanges(c, up.URL+"/resolve?sig=ok", Want{}, asked)
	if err != nil || !bytes.Equal(got, concat(asked)) {
		t.Fatalf("through a redirect: %v", err)
	}
	if up.Hits()[0].Header.Get("Authorization") == "" {
		t.Error("the upstream was not sent the proxy token")
	}
	_, err = readRanges(c, up.URL+"/resolve?sig=expired", Want{}, asked)
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("err = %v, want ErrExpired", err)
	}
	noSecrets(t, err)
}

func TestGetRangesStalledBody(t *testing.T) {
	const bnd = "B"
	release := make(chan struct{})
	defer close(release)
	cdn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "multipart/byteranges; boundary="+bnd)
		w.WriteHeader(http.StatusPartialContent)
		w.Write(multipartBody(bnd, honest()[:1], false))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c := newClient(t, "https://hub.invalid", func(o *Options) { o.StallTimeout = 50 * time.Millisecond })
	_, err := readRanges(c, cdn.URL+"/blob", Want{}, asked)
	if !errors.Is(err, ErrStalled) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrStalled and ErrUnavailable", err)
	}
}
