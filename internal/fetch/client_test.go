package fetch

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestNewValidatesUpstream(t *testing.T) {
	for _, raw := range []string{
		"",
		"huggingface.co",
		"ftp://huggingface.co",
		"https://",
		"https://user:" + proxyToken + "@huggingface.co",
		"https://huggingface.co/?x=1",
		"https://huggingface.co/#frag",
		"https://[::1",
	} {
		_, err := New(Options{Upstream: raw})
		if err == nil {
			t.Errorf("New(%q) succeeded", raw)
		}
		noSecrets(t, err)
	}
	if _, err := New(Options{Upstream: "https://huggingface.co", Token: "a\nb"}); err == nil {
		t.Error("a token with a newline was accepted")
	}
}

func TestNewDefaults(t *testing.T) {
	c, err := New(Options{Upstream: "https://hub.example/mirror/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Upstream().String(); got != "https://hub.example/mirror" {
		t.Errorf("Upstream() = %q", got)
	}
	c.Upstream().Host = "evil.example" // a copy: the client is unchanged
	if c.Upstream().Host != "hub.example" {
		t.Error("Upstream() exposes the client's URL")
	}
	if c.ua != "hubproxy" || c.metaTimeout != 10*time.Second || c.maxRedirects != 10 || c.retries != 3 || c.stall != 30*time.Second {
		t.Errorf("defaults: %+v", c)
	}
	tr, ok := c.rt.(*http.Transport)
	if !ok || tr.MaxIdleConnsPerHost != 64 || !tr.DisableCompression || !tr.ForceAttemptHTTP2 {
		t.Errorf("default transport not tuned: %#v", c.rt)
	}
	if tr == http.DefaultTransport {
		t.Error("the default transport must be a clone")
	}

	c, _ = New(Options{Upstream: "https://hub.example", Retries: -1, MaxRedirects: -1})
	if c.retries != 0 || c.maxRedirects != 0 {
		t.Errorf("negative values must disable: retries %d, redirects %d", c.retries, c.maxRedirects)
	}
}

func TestSameOrigin(t *testing.T) {
	c, _ := New(Options{Upstream: "https://Hub.Example"})
	for raw, want := range map[string]bool{
		"https://hub.example/x":     true,
		"https://HUB.example:443/x": true,
		"http://hub.example/x":      false,
		"https://hub.example:8443/": false,
		"https://cdn.hub.example/x": false,
		"https://hub.example.evil/": false,
	} {
		u, _ := url.Parse(raw)
		if got := c.sameOrigin(u); got != want {
			t.Errorf("sameOrigin(%s) = %v, want %v", raw, got, want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	c, _ := New(Options{Upstream: "https://hub.example"})
	for v, want := range map[string]time.Duration{
		"":                              0,
		"2":                             2 * time.Second,
		"3600":                          5 * time.Second, // capped
		"-1":                            0,
		"soon":                          0,
		"1.5":                           0,
		"Sun, 06 Nov 1994 08:49:37 GMT": 0, // in the past
	} {
		if got := c.retryAfter(v); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if got := c.retryAfter(future); got != 5*time.Second {
		t.Errorf("retryAfter(an hour ahead) = %s, want the 5s cap", got)
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	c, _ := New(Options{Upstream: "https://hub.example"})
	for attempt, base := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 2 * time.Second, 2 * time.Second} {
		d := c.backoff(attempt)
		if lo, hi := base*8/10, base*12/10; d < lo || d > hi {
			t.Errorf("backoff(%d) = %s, want within 20%% of %s", attempt, d, base)
		}
	}
}

func TestStatusErrorIs(t *testing.T) {
	for _, tc := range []struct {
		code          int
		download      bool
		unavail, expd bool
	}{
		{500, false, true, false},
		{503, true, true, false},
		{429, false, true, false},
		{404, false, false, false},
		{401, false, false, false},
		{401, true, false, true},
		{403, true, false, true},
		{410, true, false, true},
		{404, true, false, false},
	} {
		err := error(&StatusError{Code: tc.code, download: tc.download})
		if errors.Is(err, ErrUnavailable) != tc.unavail || errors.Is(err, ErrExpired) != tc.expd {
			t.Errorf("%d download=%v: Is(ErrUnavailable)=%v Is(ErrExpired)=%v", tc.code, tc.download,
				errors.Is(err, ErrUnavailable), errors.Is(err, ErrExpired))
		}
	}
}

func TestRedactAndClean(t *testing.T) {
	u, _ := url.Parse("https://user:pw@cdn.example/a%20b?sig=SIGNATURE#frag")
	if got := redact(u); got != "https://cdn.example/a%20b" {
		t.Errorf("redact = %q", got)
	}
	msg := clean("token "+proxyToken+"\r\nInjected: yes "+strings.Repeat("x", 600), 100, []string{proxyToken})
	if strings.Contains(msg, proxyToken) || strings.ContainsAny(msg, "\r\n") || len(msg) > 104 {
		t.Errorf("clean = %q", msg)
	}
}
