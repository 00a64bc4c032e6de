package hubtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fetch is do for responses whose body may break: it returns the read error.
func fetch(t *testing.T, ctx context.Context, url string, hdr ...string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range hdr {
		k, v, _ := strings.Cut(kv, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

func wantFired(t *testing.T, h *Hub, name string, n int64) {
	t.Helper()
	if got := h.FaultCounts()[name]; got != n {
		t.Errorf("FaultCounts()[%s] = %d, want %d (all: %v)", name, got, n, h.FaultCounts())
	}
}

func TestStatus5xx(t *testing.T) {
	h := NewT(t, Options{})
	addFixture(t, h)
	h.SetFaults(Faults{Status5xx: Fault{N: 2, Target: TargetAPI}})
	// A resolve request does not match an API fault and does not consume it.
	resp, _ := do(t, "HEAD", h.URL+"/acme/model/resolve/main/config.json")
	wantStatus(t, resp, 302)
	for i, want := range []int{503, 503, 200} {
		resp, _ := do(t, "GET", h.URL+"/api/models/acme/model")
		wantStatus(t, resp, want)
		if i < 2 {
			wantHeader(t, resp, "Retry-After", "0")
		}
	}
	wantFired(t, h, "Status5xx", 2)
	if f := h.Faults(); f.Status5xx.N != 0 {
		t.Errorf("remaining N = %d", f.Status5xx.N)
	}

	url := cdnURL(t, h, "model.safetensors")
	h.SetFaults(Faults{Status5xx: Fault{N: 1}}) // TargetAny
	resp, _ = do(t, "GET", url)
	wantStatus(t, resp, 503)
	resp, _ = do(t, "GET", url)
	wantStatus(t, resp, 200)
	wantFired(t, h, "Status5xx", 3)
}

func TestTooManyRequests(t *testing.T) {
	h := NewT(t, Options{})
	addFixture(t, h)
	h.SetFaults(Faults{TooManyRequests: Fault{N: 2, Target: TargetResolve}})
	for _, want := range []int{429, 429, 302} {
		resp, _ := do(t, "HEAD", h.URL+"/acme/model/resolve/main/config.json")
		wantStatus(t, resp, want)
		if want == 429 {
			wantHeader(t, resp, "Retry-After", "0")
		}
	}
	wantFired(t, h, "TooManyRequests", 2)
}

// TestCuttingFaults checks the faults that break a body: each fires on
// exactly N requests and the next one is whole again.
func TestCuttingFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults func(Fault) Faults
	}{
		{"ResetMidBody", func(f Fault) Faults { return Faults{ResetMidBody: f} }},
		{"Truncate", func(f Fault) Faults { return Faults{Truncate: f, CutAt: 1000} }},
		{"StallBody", func(f Fault) Faults { return Faults{StallBody: f, CutAt: 1000} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewT(t, Options{})
			f := addFixture(t, h)
			url := cdnURL(t, h, "model.safetensors")
			h.SetFaults(tc.faults(Fault{N: 2, Target: TargetCDN}))
			// The regular file goes through resolve-cache, which a CDN
			// fault does not match.
			if resp, body := do(t, "GET", h.URL+"/acme/model/raw/main/config.json"); resp.StatusCode != 200 || !bytes.Equal(body, f.config) {
				t.Fatal("a non-matching request was hit")
			}
			for i := range 3 {
				// A bound, so a stall that should have ended fails the test
				// instead of hanging it.
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				if tc.name == "StallBody" && i < 2 {
					// Read what the stall lets through, then give up.
					req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					got := make([]byte, 1000)
					if _, err := io.ReadFull(resp.Body, got); err != nil || !bytes.Equal(got, f.weights[:1000]) {
						t.Fatalf("stalled prefix: %v", err)
					}
					cancel()
					if _, err := io.ReadAll(resp.Body); err == nil {
						t.Error("a stalled body ended cleanly")
					}
					resp.Body.Close()
					continue
				}
				resp, body, err := fetch(t, ctx, url)
				cancel()
				wantStatus(t, resp, 200)
				wantHeader(t, resp, "Content-Length", strconv.Itoa(len(f.weights)))
				if i < 2 {
					if err == nil {
						t.Fatalf("request %d: body read cleanly", i)
					}
					if len(body) >= len(f.weights) || !bytes.Equal(body, f.weights[:len(body)]) {
						t.Errorf("request %d: got %d bytes", i, len(body))
					}
					if tc.name == "Truncate" && (len(body) != 1000 || !errors.Is(err, io.ErrUnexpectedEOF)) {
						t.Errorf("truncated after %d bytes with %v", len(body), err)
					}
				} else if err != nil || !bytes.Equal(body, f.weights) {
					t.Fatalf("request %d after the fault: %v", i, err)
				}
			}
			wantFired(t, h, tc.name, 2)
		})
	}
}

func TestStallForResumes(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	h.SetFaults(Faults{StallBody: Fault{N: 1, Target: TargetResolve}, StallFor: time.Millisecond})
	resp, body, err := fetch(t, context.Background(), h.URL+"/acme/model/raw/main/big.dat")
	wantStatus(t, resp, 200)
	if err != nil || !bytes.Equal(body, f.big) {
		t.Fatalf("after a bounded stall the body should be whole: %v", err)
	}
	wantFired(t, h, "StallBody", 1)
}

func TestCloseEndsStall(t *testing.T) {
	h, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := addFixture(t, h)
	h.SetFaults(Faults{StallBody: Fault{N: 1}})
	resp, err := http.Get(h.URL + "/acme/model/raw/main/big.dat")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, make([]byte, len(f.big)/2)); err != nil {
		t.Fatal(err)
	}
	h.Close() // must not hang on the stalled handler
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("stalled body ended cleanly after Close")
	}
}

func TestRangeFaults(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	url := cdnURL(t, h, "model.safetensors")
	n := strconv.Itoa(len(f.weights))

	h.SetFaults(Faults{IgnoreRange: Fault{N: 2, Target: TargetCDN}})
	resp, _ := do(t, "GET", url) // no Range: does not match
	wantStatus(t, resp, 200)
	for i, want := range []int{200, 200, 206} {
		resp, body := do(t, "GET", url, "Range: bytes=10-19")
		wantStatus(t, resp, want)
		if i < 2 && !bytes.Equal(body, f.weights) || i == 2 && !bytes.Equal(body, f.weights[10:20]) {
			t.Errorf("request %d: %d bytes", i, len(body))
		}
	}
	wantFired(t, h, "IgnoreRange", 2)

	h.SetFaults(Faults{WrongContentRange: Fault{N: 2}})
	for i, tc := range []struct {
		rng, cr  string
		from, to int
	}{
		{"bytes=10-19", "bytes 11-20/" + n, 11, 21},
		{"bytes=-10", "bytes " + strconv.Itoa(len(f.weights)-11) + "-" + strconv.Itoa(len(f.weights)-2) + "/" + n, len(f.weights) - 11, len(f.weights) - 1},
		{"bytes=10-19", "bytes 10-19/" + n, 10, 20},
	} {
		resp, body := do(t, "GET", url, "Range: "+tc.rng)
		wantStatus(t, resp, 206)
		wantHeader(t, resp, "Content-Range", tc.cr)
		if !bytes.Equal(body, f.weights[tc.from:tc.to]) {
			t.Errorf("request %d: body does not match its Content-Range", i)
		}
	}
	wantFired(t, h, "WrongContentRange", 2)
}

func TestCorruptBytes(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	h.SetFaults(Faults{CorruptBytes: Fault{N: 1}, CorruptPath: "big.dat"})
	// Another file does not match CorruptPath.
	_, body := do(t, "GET", h.URL+"/acme/model/raw/main/config.json")
	if !bytes.Equal(body, f.config) {
		t.Fatal("config was corrupted")
	}
	_, body = do(t, "GET", h.URL+"/acme/model/raw/main/big.dat", "Range: bytes=1-8193")
	want := bytes.Clone(f.big[1:8194])
	want[0] ^= 0xFF
	want[4096] ^= 0xFF
	want[8192] ^= 0xFF
	if !bytes.Equal(body, want) {
		t.Error("corruption is not the documented byte flips")
	}
	_, body = do(t, "GET", h.URL+"/acme/model/raw/main/big.dat")
	if !bytes.Equal(body, f.big) {
		t.Error("corrupted more than N times")
	}
	if !bytes.Equal(f.big[:8], RandomBytes(7, 8)) {
		t.Error("corruption changed the stored data")
	}
	wantFired(t, h, "CorruptBytes", 1)
}

func TestRedirectForeign(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	h.SetFaults(Faults{RedirectForeign: Fault{N: 2, Target: TargetResolve}})
	for _, p := range []struct {
		path string
		data []byte
	}{{"model.safetensors", f.weights}, {"config.json", f.config}} {
		resp, _ := do(t, "HEAD", h.URL+"/acme/model/resolve/main/"+p.path, "Authorization: Bearer hf_secret")
		wantStatus(t, resp, 302)
		loc := resp.Header.Get("Location")
		if !strings.HasPrefix(loc, h.ForeignURL+"/") {
			t.Fatalf("Location %q is not on the foreign host", loc)
		}
		wantHeader(t, resp, "X-Repo-Commit", f.commit)
		wantHeader(t, resp, "X-Linked-Size", strconv.Itoa(len(p.data)))
		_, body := do(t, "GET", loc)
		if !bytes.Equal(body, p.data) {
			t.Errorf("%s: the foreign host served other bytes", p.path)
		}
		do(t, "HEAD", loc, "Authorization: Bearer hf_secret")
	}
	resp, _ := do(t, "HEAD", h.URL+"/acme/model/resolve/main/model.safetensors")
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, h.CDNURL) {
		t.Errorf("after N the resolve goes to %q", loc)
	}
	c := h.Counters()
	if c.ForeignRequests != 4 || c.AuthSeenByForeign != 2 {
		t.Errorf("foreign requests %d, with auth %d; want 4 and 2", c.ForeignRequests, c.AuthSeenByForeign)
	}
	wantFired(t, h, "RedirectForeign", 2)
	h.ResetCounters()
	if len(h.FaultCounts()) != 0 || h.Counters().ForeignRequests != 0 {
		t.Error("ResetCounters left counts behind")
	}
}
