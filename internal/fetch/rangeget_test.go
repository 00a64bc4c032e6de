package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// blob is the file every range test reads parts of.
var blob = func() []byte {
	b := make([]byte, 1000)
	for i := range b {
		b[i] = byte(i*7 + i/256)
	}
	return b
}()

// serveBlob answers ranges on blob the way a CDN does (206, Content-Range).
func serveBlob(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(blob))
}

// readRange is GetRange plus io.ReadAll, returning what was read and the
// first error from either.
func readRange(c *Client, rawURL, auth string, off, n int64) ([]byte, error) {
	rc, err := c.GetRange(context.Background(), rawURL, auth, Want{}, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestGetRangeExactBytes(t *testing.T) {
	cdn := newServer(t, serveBlob)
	c := newClient(t, "https://hub.invalid", nil)
	for _, tc := range []struct{ off, n int64 }{{0, 1}, {10, 100}, {999, 1}, {0, 1000}} {
		got, err := readRange(c, cdn.URL+"/blob?sig=SIGNATURE", "", tc.off, tc.n)
		if err != nil {
			t.Fatalf("[%d,+%d): %v", tc.off, tc.n, err)
		}
		if !bytes.Equal(got, blob[tc.off:tc.off+tc.n]) {
			t.Fatalf("[%d,+%d): wrong bytes", tc.off, tc.n)
		}
	}
	h := cdn.Hits()[1]
	if h.Header.Get("Range") != "bytes=10-109" || h.Header.Get("Accept-Encoding") != "identity" {
		t.Fatalf("request headers %v", h.Header)
	}
}

func TestGetRangeRejectsWrongAnswers(t *testing.T) {
	const off, n = 10, 100
	respond := func(code int, contentRange, contentLength, encoding string, body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if contentRange != "" {
				w.Header().Set("Content-Range", contentRange)
			}
			if contentLength != "" {
				w.Header().Set("Content-Length", contentLength)
			}
			if encoding != "" {
				w.Header().Set("Content-Encoding", encoding)
			}
			w.WriteHeader(code)
			w.Write(body)
		}
	}
	part := blob[off : off+n]
	cases := []struct {
		name string
		h    http.HandlerFunc
	}{
		{"200 for a range", func(w http.ResponseWriter, r *http.Request) { w.Write(blob) }},
		{"other span", respond(206, "bytes 0-99/1000", "100", "", blob[:100])},
		{"shorter span", respond(206, "bytes 10-108/1000", "99", "", part[:99])},
		{"unknown total", respond(206, "bytes 10-109/*", "100", "", part)},
		{"total too small", respond(206, "bytes 10-109/100", "100", "", part)},
		{"no Content-Range", respond(206, "", "100", "", part)},
		{"signed numbers", respond(206, "bytes +10-109/1000", "100", "", part)},
		{"multipart", respond(206, "", "", "", part)},
		{"Content-Length disagrees", respond(206, "bytes 10-109/1000", "50", "", part[:50])},
		{"encoded body", respond(206, "bytes 10-109/1000", "100", "gzip", part)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cdn := newServer(t, tc.h)
			c := newClient(t, "https://hub.invalid", nil)
			rc, err := c.GetRange(context.Background(), cdn.URL+"/blob?sig=SIGNATURE", "", Want{}, off, n)
			if rc != nil {
				rc.Close()
				t.Fatal("a body was returned with a wrong answer")
			}
			var re *RangeError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *RangeError", err)
			}
			if re.Want != "bytes 10-109/*" || re.URL != cdn.URL+"/blob" {
				t.Errorf("RangeError %+v", re)
			}
			noSecrets(t, err)
		})
	}
}

func TestGetRangeShortBody(t *testing.T) {
	const off, n = 0, 100
	for name, withLength := range map[string]bool{"content-length": true, "chunked": false} {
		t.Run(name, func(t *testing.T) {
			cdn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, len(blob)))
				if withLength {
					w.Header().Set("Content-Length", strconv.Itoa(n))
				}
				w.WriteHeader(http.StatusPartialContent)
				w.Write(blob[off : off+60])
				w.(http.Flusher).Flush()
				// Returning early: the server ends the response short.
			})
			c := newClient(t, "https://hub.invalid", nil)
			got, err := readRange(c, cdn.URL+"/blob", "", off, n)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
			}
			if !bytes.Equal(got, blob[off:off+60]) {
				t.Fatalf("got %d bytes, want the 60 sent", len(got))
			}
		})
	}
}

func TestGetRangeLongBody(t *testing.T) {
	const off, n = 5, 50
	cdn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, len(blob)))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(blob[off : off+n])
		w.(http.Flusher).Flush() // chunked: no Content-Length holds it to n
		w.Write(blob[off+n : off+n+20])
	})
	c := newClient(t, "https://hub.invalid", nil)
	got, err := readRange(c, cdn.URL+"/blob", "", off, n)
	if !errors.Is(err, ErrLongBody) {
		t.Fatalf("err = %v, want ErrLongBody", err)
	}
	if !bytes.Equal(got, blob[off:off+n]) {
		t.Fatalf("got %d bytes, want exactly the %d asked for", len(got), n)
	}
}

func TestGetRangeStalledBody(t *testing.T) {
	release := make(chan struct{})
	cdn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 0-99/1000")
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusPartialContent)
		w.Write(blob[:40])
		w.(http.Flusher).Flush()
		select { // go quiet until the client gives up
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	c := newClient(t, "https://hub.invalid", func(o *Options) { o.StallTimeout = 50 * time.Millisecond })
	got, err := readRange(c, cdn.URL+"/blob", "", 0, 100)
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("err = %v, want ErrStalled", err)
	}
	if !bytes.Equal(got, blob[:40]) {
		t.Fatalf("got %d bytes, want the 40 sent before the stall", len(got))
	}
}

func TestGetRangeSlowReaderIsNotAStall(t *testing.T) {
	cdn := newServer(t, serveBlob)
	c := newClient(t, "https://hub.invalid", func(o *Options) { o.StallTimeout = 100 * time.Millisecond })
	rc, err := c.GetRange(context.Background(), cdn.URL+"/blob", "", Want{}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// The consumer dawdles longer than StallTimeout between reads; only time
	// spent waiting on the upstream counts.
	buf := make([]byte, 400)
	var got []byte
	for {
		time.Sleep(150 * time.Millisecond)
		k, err := rc.Read(buf)
		got = append(got, buf[:k]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
	}
	if !bytes.Equal(got, blob) {
		t.Fatal("wrong bytes")
	}
}

func TestGetRangeStalledHeadersRetried(t *testing.T) {
	var n atomic.Int32
	release := make(chan struct{})
	cdn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select { // the first attempt never gets its headers
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		serveBlob(w, r)
	})
	t.Cleanup(func() { close(release) })
	c := newClient(t, "https://hub.invalid", func(o *Options) { o.StallTimeout = 50 * time.Millisecond })
	got, err := readRange(c, cdn.URL+"/blob", "", 100, 200)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, blob[100:300]) || n.Load() != 2 {
		t.Fatalf("wrong bytes or %d attempts", n.Load())
	}

	c = newClient(t, "https://hub.invalid", func(o *Options) { o.StallTimeout = 50 * time.Millisecond; o.Retries = -1 })
	n.Store(0)
	_, err = readRange(c, cdn.URL+"/blob", "", 0, 10)
	if !errors.Is(err, ErrStalled) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrStalled and ErrUnavailable", err)
	}
}

func TestGetRangeCredentialsStayOnTheUpstream(t *testing.T) {
	// The two servers share 127.0.0.1 and differ by port: different hosts.
	var upURL atomic.Pointer[string]
	cdn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bounce" { // back to the upstream: credentials stay dropped
			http.Redirect(w, r, *upURL.Load()+"/file", http.StatusFound)
			return
		}
		serveBlob(w, r)
	})
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/file":
			serveBlob(w, r)
		case "/to-cdn":
			http.Redirect(w, r, cdn.URL+"/blob?sig=SIGNATURE", http.StatusFound)
		case "/to-cdn-and-back":
			http.Redirect(w, r, cdn.URL+"/bounce", http.StatusFound)
		}
	})
	upURL.Store(&up.URL)

	for _, tc := range []struct {
		name, auth, want string
	}{
		{"caller auth", callerAuth, callerAuth},
		{"proxy token", "", "Bearer " + proxyToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, up.URL, nil)
			before := len(up.Hits())
			if _, err := readRange(c, up.URL+"/file", tc.auth, 0, 10); err != nil {
				t.Fatal(err)
			}
			if got := up.Hits()[before].Header.Get("Authorization"); got != tc.want {
				t.Errorf("upstream Authorization = %q, want %q", got, tc.want)
			}
			for _, path := range []string{"/to-cdn", "/to-cdn-and-back"} {
				if _, err := readRange(c, up.URL+path, tc.auth, 0, 10); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
			}
			if _, err := readRange(c, cdn.URL+"/blob", tc.auth, 0, 10); err != nil {
				t.Fatal(err)
			}
			for _, h := range cdn.Hits() {
				if a := h.Header.Get("Authorization"); a != "" {
					t.Errorf("the CDN got Authorization %q on %s", a, h.URI)
				}
			}
			hits := up.Hits()
			last := hits[len(hits)-1] // /file, reached back from the CDN
			if last.URI != "/file" || last.Header.Get("Authorization") != "" {
				t.Errorf("after a hop off the upstream, %s got Authorization %q", last.URI, last.Header.Get("Authorization"))
			}
			if to := hits[len(hits)-2]; to.URI != "/to-cdn-and-back" || to.Header.Get("Authorization") != tc.want {
				t.Errorf("%s got Authorization %q", to.URI, to.Header.Get("Authorization"))
			}
		})
	}
}

// A refused download URL matches ErrExpired wherever it points: a CDN, or the
// upstream's own host when it serves the bytes itself (self-hosted hubs, a
// hubproxy tier), so the resolver refreshes the link before giving up.
func TestGetRangeExpiredDownloadURL(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusGone} {
		deny := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			io.WriteString(w, `{"error":"Request signature expired"}`)
		}
		cdn := newServer(t, deny)
		up := newServer(t, deny)
		c := newClient(t, up.URL, nil)

		_, err := readRange(c, cdn.URL+"/blob?sig=SIGNATURE", callerAuth, 0, 10)
		var se *StatusError
		if !errors.As(err, &se) || se.Code != code || !errors.Is(err, ErrExpired) {
			t.Fatalf("CDN %d: err = %v, want a StatusError matching ErrExpired", code, err)
		}
		if se.Message != "Request signature expired" || se.URL != cdn.URL+"/blob" {
			t.Errorf("CDN %d: %+v", code, se)
		}
		if errors.Is(err, ErrUnavailable) {
			t.Errorf("CDN %d matches ErrUnavailable", code)
		}
		noSecrets(t, err)

		_, err = readRange(c, up.URL+"/file", callerAuth, 0, 10)
		if !errors.As(err, &se) || se.Code != code || !errors.Is(err, ErrExpired) {
			t.Fatalf("upstream %d: err = %v, want a StatusError matching ErrExpired", code, err)
		}
		noSecrets(t, err)
	}
}

func TestGetRangeRetries5xx(t *testing.T) {
	var n atomic.Int32
	cdn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		serveBlob(w, r)
	})
	c := newClient(t, "https://hub.invalid", nil)
	got, err := readRange(c, cdn.URL+"/blob", "", 3, 4)
	if err != nil || !bytes.Equal(got, blob[3:7]) {
		t.Fatalf("got %v, %v", got, err)
	}

	n.Store(-100) // from now on every attempt fails
	_, err = readRange(c, cdn.URL+"/blob", "", 3, 4)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestGetRangeNetworkErrorIsUnavailable(t *testing.T) {
	cdn := newServer(t, func(http.ResponseWriter, *http.Request) {})
	addr := cdn.URL
	cdn.Close()
	c := newClient(t, "https://hub.invalid", nil)
	_, err := readRange(c, addr+"/blob?sig=SIGNATURE", callerAuth, 0, 10)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	noSecrets(t, err)
}

func TestGetRangeBadArguments(t *testing.T) {
	c := newClient(t, "https://hub.invalid", nil)
	for _, tc := range []struct {
		url    string
		off, n int64
	}{
		{"https://cdn.invalid/x", 0, 0},
		{"https://cdn.invalid/x", -1, 5},
		{"https://cdn.invalid/x", 1<<63 - 2, 5},
		{"/relative?sig=SIGNATURE", 0, 1},
		{"ftp://cdn.invalid/x?sig=SIGNATURE", 0, 1},
		{"https://user:SIGNATURE@cdn.invalid/x", 0, 1},
		{"http://[::1?sig=SIGNATURE", 0, 1},
	} {
		rc, err := c.GetRange(context.Background(), tc.url, callerAuth, Want{}, tc.off, tc.n)
		if err == nil {
			rc.Close()
			t.Errorf("GetRange(%q, %d, %d) succeeded", tc.url, tc.off, tc.n)
		}
		noSecrets(t, err)
	}
}

func TestGetRangeCallerCancel(t *testing.T) {
	cdn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 0-99/1000")
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusPartialContent)
		w.Write(blob[:10])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c := newClient(t, "https://hub.invalid", nil)
	ctx, cancel := context.WithCancel(context.Background())
	rc, err := c.GetRange(ctx, cdn.URL+"/blob", "", Want{}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, 10)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = rc.Read(buf)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrStalled) {
		t.Fatalf("err = %v, want context.Canceled only", err)
	}
}

func TestGetRangeRefusesHostsOutsideRedirectHosts(t *testing.T) {
	cdn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 0-1/10")
		w.WriteHeader(http.StatusPartialContent)
		w.Write([]byte("ab"))
	})
	c, err := New(Options{Upstream: "http://hub.invalid", RedirectHosts: []string{"cdn.example"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetRange(context.Background(), cdn.URL+"/blob", "", Want{}, 0, 2)
	var pe *ProtocolError
	if !errors.As(err, &pe) || cdn.Count() != 0 {
		t.Fatalf("err = %v after %d requests, want a ProtocolError and no request", err, cdn.Count())
	}
	// Listed hosts (and their subdomains) are allowed; so is any host when
	// the list is empty.
	u, _ := url.Parse(cdn.URL)
	for _, hosts := range [][]string{{u.Hostname()}, nil} {
		c, _ := New(Options{Upstream: "http://hub.invalid", RedirectHosts: hosts})
		body, err := c.GetRange(context.Background(), cdn.URL+"/blob", "", Want{}, 0, 2)
		if err != nil {
			t.Fatalf("hosts %v: %v", hosts, err)
		}
		body.Close()
	}
	if !(&Client{redirectHosts: []string{"hf.co"}, base: &url.URL{Scheme: "https", Host: "huggingface.co"}}).hostAllowed(&url.URL{Scheme: "https", Host: "cdn-lfs.hf.co"}) {
		t.Error("subdomain of an allowed host refused")
	}
	if (&Client{redirectHosts: []string{"hf.co"}, base: &url.URL{Scheme: "https", Host: "huggingface.co"}}).hostAllowed(&url.URL{Scheme: "https", Host: "evilhf.co"}) {
		t.Error("a host merely ending in an allowed name was accepted")
	}
}
