package metrics

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Transport wraps next so every upstream request is counted by kind and
// status, timed to its response headers, and its body bytes counted as they
// are read. It is a decorator: the upstream client does not know about it.
func (m *Metrics) Transport(next http.RoundTripper) http.RoundTripper {
	if m == nil {
		return next
	}
	return &transport{m: m, next: next}
}

type transport struct {
	m    *Metrics
	next http.RoundTripper
}

// kind classifies a request without looking at repo or file names.
func kind(r *http.Request) string {
	switch {
	case r.Header.Get("Range") != "":
		return "range"
	case strings.HasPrefix(r.URL.Path, "/api/") && !strings.HasPrefix(r.URL.Path, "/api/resolve-cache/"):
		return "api"
	}
	return "resolve"
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	k := kind(r)
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	elapsed := time.Since(start).Seconds()
	t.m.UpstreamLatency.WithLabelValues(k).Observe(elapsed)
	t.m.UpstreamLatencyOld.WithLabelValues(k).Observe(elapsed)
	if err != nil {
		t.m.Upstream.WithLabelValues(k, "0").Inc()
		t.m.UpstreamErrors.WithLabelValues(k).Inc()
		return nil, err
	}
	t.m.Upstream.WithLabelValues(k, strconv.Itoa(resp.StatusCode)).Inc()
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		t.m.UpstreamErrors.WithLabelValues(k).Inc()
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, c: t.m.UpstreamBytes.WithLabelValues(k)}
	return resp, nil
}

type adder interface{ Add(float64) }

type countingBody struct {
	io.ReadCloser
	c adder
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.c.Add(float64(n))
	}
	return n, err
}
