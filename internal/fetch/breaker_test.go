package fetch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// clock is a settable time source for the breaker.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestBreakerOpensProbesAndCloses(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	b := newBreaker(5*time.Second, clk.now, slog.New(slog.DiscardHandler))
	tk, err := b.allow()
	if err != nil || tk.probe {
		t.Fatalf("closed breaker: allow = %+v, %v", tk, err)
	}
	b.failed(tk, "dial tcp: connection refused")
	if h := b.health(); h.Up || !strings.Contains(h.Reason, "refused") {
		t.Fatalf("after a failure: %+v", h)
	}
	if _, err := b.allow(); err == nil || !errors.Is(err, errMarkedDown) {
		t.Fatalf("open breaker let a call through: %v", err)
	}
	clk.add(5 * time.Second)
	probe, err := b.allow()
	if err != nil || !probe.probe {
		t.Fatalf("after the cool-down: allow = %+v, %v; want one probe", probe, err)
	}
	if _, err := b.allow(); err == nil {
		t.Fatal("a second call went through while the probe is in flight")
	}
	b.failed(probe, "timeout")
	clk.add(5 * time.Second)
	if _, err := b.allow(); err == nil {
		t.Fatal("a failed probe did not double the cool-down")
	}
	clk.add(5 * time.Second)
	probe, err = b.allow()
	if err != nil || !probe.probe {
		t.Fatalf("after 10s: %+v, %v", probe, err)
	}
	// A caller that gives up frees the probe slot without a verdict.
	b.abandoned(probe)
	if probe, err = b.allow(); err != nil || !probe.probe {
		t.Fatalf("after an abandoned probe: %+v, %v", probe, err)
	}
	b.answered(probe)
	if h := b.health(); !h.Up {
		t.Fatalf("an answered probe did not close the breaker: %+v", h)
	}
	if tk, err := b.allow(); err != nil || tk.probe {
		t.Fatalf("closed again: %+v, %v", tk, err)
	}
}

// hang answers nothing until the client gives up.
func hang(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// An upstream that accepts connections but never answers costs one metadata
// timeout; after that calls fail at once (so the cache answers at cache
// speed) until a probe finds it answering again.
func TestHungUpstreamIsRememberedAndProbed(t *testing.T) {
	var mu sync.Mutex
	handler := http.HandlerFunc(hang)
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := handler
		mu.Unlock()
		h(w, r)
	})
	c := newClient(t, up.URL, func(o *Options) {
		o.MetadataTimeout = 100 * time.Millisecond
		o.Cooldown = time.Hour
	})
	clk := &clock{t: time.Now()}
	c.breaker.now = clk.now
	repo := hub.MustRepo(hub.Model, "org/m")

	_, err := c.Resolve(context.Background(), "", repo, "main", "f.json")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("hung upstream: err = %v, want ErrUnavailable", err)
	}
	sent := up.Count()
	for i := 0; i < 20; i++ {
		if _, err := c.Resolve(context.Background(), "", repo, "main", "f.json"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("call %d: %v", i, err)
		}
		resp, err := c.API(context.Background(), http.MethodGet, "/api/models/org/m", "", http.Header{}, nil)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("API call %d got an answer from a hung upstream", i)
		}
	}
	if up.Count() != sent {
		t.Fatalf("the upstream saw %d more requests while marked down", up.Count()-sent)
	}
	if c.Health().Up {
		t.Fatal("Health says up")
	}

	mu.Lock()
	handler = headHandler(map[string]string{"X-Repo-Commit": testCommit, "ETag": `"` + wantGit + `"`, "Content-Length": "3"})
	mu.Unlock()
	clk.add(time.Hour)
	if _, err := c.Resolve(context.Background(), "", repo, "main", "f.json"); err != nil {
		t.Fatalf("probe after the cool-down: %v", err)
	}
	if !c.Health().Up {
		t.Fatal("Health still down after an answer")
	}
}

// A 429 is an answer: the upstream is up and asks for less. It is retried
// (honouring Retry-After) and never marks the upstream down.
func TestTooManyRequestsDoesNotMarkTheUpstreamDown(t *testing.T) {
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	c := newClient(t, up.URL, nil)
	_, err := c.Resolve(context.Background(), "", hub.MustRepo(hub.Model, "org/m"), "main", "f.json")
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusTooManyRequests {
		t.Fatalf("err = %v", err)
	}
	if n := up.Count(); n != 1+defaultRetries {
		t.Errorf("upstream saw %d requests, want %d (retried)", n, 1+defaultRetries)
	}
	if !c.Health().Up {
		t.Error("a 429 marked the upstream down")
	}
}

// API answers are bounded too: headers within the metadata timeout, and a
// body that stops moving fails with ErrUnavailable instead of hanging.
func TestAPIHasDeadlines(t *testing.T) {
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/stall") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, `{"id":`)
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	})
	c := newClient(t, up.URL, func(o *Options) {
		o.MetadataTimeout = 100 * time.Millisecond
		o.StallTimeout = 100 * time.Millisecond
	})
	resp, err := c.API(context.Background(), http.MethodGet, "/api/models/org/m/stall", "", http.Header{}, nil)
	if err != nil {
		t.Fatalf("headers came; err = %v", err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("stalled body: err = %v, want ErrUnavailable", err)
	}
	_, err = c.API(context.Background(), http.MethodGet, "/api/models/org/m", "", http.Header{}, nil)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no headers: err = %v, want ErrUnavailable", err)
	}
}
