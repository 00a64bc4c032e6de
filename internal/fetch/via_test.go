package fetch

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Every upstream request names this proxy in Via, after the Via of the
// request it is made for, so that a chain of proxies can tell a request
// that came back.
func TestUpstreamRequestsCarryVia(t *testing.T) {
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	c := newClient(t, up.URL, func(o *Options) { o.Instance = "hubproxy-a1" })
	f := hub.FileRef{Repo: gpt2, Rev: "main", Path: "config.json"}
	c.Resolve(context.Background(), "", f)
	c.Resolve(WithVia(context.Background(), "1.1 hubproxy-b2"), "", f)
	if resp, err := c.API(WithVia(context.Background(), "1.0 corp-proxy"), http.MethodGet, "/api/models/gpt2", "", nil, nil); err == nil {
		resp.Body.Close()
	}
	hits := up.Hits()
	want := []string{"1.1 hubproxy-a1", "1.1 hubproxy-b2, 1.1 hubproxy-a1", "1.0 corp-proxy, 1.1 hubproxy-a1"}
	if len(hits) != len(want) {
		t.Fatalf("upstream saw %d requests, want %d", len(hits), len(want))
	}
	for i, h := range hits {
		if got := h.Header.Get("Via"); got != want[i] {
			t.Errorf("%s %s: Via %q, want %q", h.Method, h.URI, got, want[i])
		}
	}

	// Without an instance name, nothing is added.
	plain := newServer(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	newClient(t, plain.URL, nil).Resolve(context.Background(), "", f)
	if v := plain.Hits()[0].Header.Get("Via"); v != "" {
		t.Errorf("a client without Instance sent Via %q", v)
	}
	if _, err := New(Options{Upstream: up.URL, Instance: "two words"}); err == nil {
		t.Error("an instance name with a space was accepted")
	}
}

// A 508 LoopDetected from upstream is ErrLoop at once: no retries (the
// answer would not change), no breaker verdict, not ErrUnavailable (no cache
// fallback stands in for a misconfiguration).
func TestLoopAnswerIsErrLoop(t *testing.T) {
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Error-Code", "LoopDetected")
		w.WriteHeader(http.StatusLoopDetected)
	})
	c := newClient(t, up.URL, nil)
	_, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: gpt2, Rev: "main", Path: "config.json"})
	if !errors.Is(err, ErrLoop) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Resolve: %v; want ErrLoop, not ErrUnavailable", err)
	}
	if n := up.Count(); n != 1 {
		t.Errorf("upstream asked %d times, want once (no retry)", n)
	}
	if _, err := c.API(context.Background(), http.MethodGet, "/api/models/gpt2", "", nil, nil); !errors.Is(err, ErrLoop) {
		t.Errorf("API: %v; want ErrLoop", err)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v; a proxy that answers 508 is up, only misconfigured", err)
	}
	if !c.Health().Up {
		t.Error("a loop marked the upstream down")
	}
}

func TestViaNames(t *testing.T) {
	for _, tc := range []struct {
		via  []string
		want bool
	}{
		{[]string{"1.1 hubproxy-a1"}, true},
		{[]string{"1.0 corp, 1.1 hubproxy-a1 (comment)"}, true},
		{[]string{"1.0 corp", "1.1 hubproxy-a1"}, true},
		{[]string{"1.1 hubproxy-a12"}, false},
		{[]string{"hubproxy-a1"}, false}, // a received-by needs its protocol first
		{nil, false},
	} {
		if got := ViaNames(tc.via, "hubproxy-a1"); got != tc.want {
			t.Errorf("ViaNames(%q) = %v, want %v", tc.via, got, tc.want)
		}
	}
	if ViaNames([]string{"1.1 x"}, "") {
		t.Error("an empty instance matched")
	}
}
