package fetch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// settle waits for the breaker's probe in flight, if any, to give its
// verdict: probes run in the background, and a test reads Health after.
func settle(b *upstreamBreaker) {
	b.mu.Lock()
	f := b.flight
	b.mu.Unlock()
	if f != nil {
		<-f
	}
}

// fakeProbe is a probe whose verdict the test sets; it counts its calls.
type fakeProbe struct {
	calls atomic.Int32
	mu    sync.Mutex
	err   error
}

func (p *fakeProbe) set(err error) { p.mu.Lock(); p.err = err; p.mu.Unlock() }

func (p *fakeProbe) probe(context.Context) error {
	p.calls.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func newTestBreaker(p *fakeProbe, clk *testutil.Clock) *upstreamBreaker {
	return newBreaker(5*time.Second, time.Second, p.probe, clk.Now, slog.New(slog.DiscardHandler))
}

// A call that gets no answer only makes the breaker ask its own probe; the
// probe's failure opens it, calls are refused for the cool-down, then the
// next call starts a probe (it is never sent as one itself), a failed one
// doubles the cool-down and an answered one closes the breaker.
func TestBreakerOpensOnlyWhenItsProbeFails(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1000, 0))
	p := &fakeProbe{}
	p.set(errors.New("dial tcp: connection refused"))
	b := newTestBreaker(p, clk)
	ctx := context.Background()
	if err := b.allow(ctx); err != nil {
		t.Fatalf("closed breaker: %v", err)
	}
	b.failed("HEAD /org/m/resolve/main/a", true, "dial tcp: connection refused")
	settle(b)
	if h := b.health(); h.Up || !strings.Contains(h.Reason, "refused") || p.calls.Load() != 1 {
		t.Fatalf("after a failure confirmed by the probe: %+v, %d probes", h, p.calls.Load())
	}
	if err := b.allow(ctx); !errors.Is(err, errMarkedDown) {
		t.Fatalf("open breaker let a call through: %v", err)
	}
	clk.Advance(5 * time.Second)
	if err := b.allow(ctx); !errors.Is(err, errMarkedDown) || p.calls.Load() != 2 {
		t.Fatalf("after the cool-down with the upstream still down: %v, %d probes", err, p.calls.Load())
	}
	clk.Advance(5 * time.Second)
	if err := b.allow(ctx); err == nil || p.calls.Load() != 2 {
		t.Fatalf("a failed probe did not double the cool-down: %v, %d probes", err, p.calls.Load())
	}
	clk.Advance(5 * time.Second)
	p.set(nil)
	if err := b.allow(ctx); err != nil || p.calls.Load() != 3 {
		t.Fatalf("after 10s, upstream back: %v, %d probes", err, p.calls.Load())
	}
	if h := b.health(); !h.Up {
		t.Fatalf("an answered probe did not close the breaker: %+v", h)
	}
}

// One route failing over and over is one suspect, however often: no probe,
// no outage. Distinct routes failing within the window make the breaker ask
// its probe, and while the probe answers it stays closed and, for a
// cool-down, asks no more, so failing calls cannot make it probe at will.
func TestBreakerNeedsDistinctRoutesAndAProbeThatFails(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1000, 0))
	p := &fakeProbe{}
	b := newTestBreaker(p, clk)
	for range 50 {
		b.failed("GET /api/models/org/m/revision/main", false, "status 500")
	}
	settle(b)
	if p.calls.Load() != 0 || !b.health().Up {
		t.Fatalf("one failing route: %d probes, %+v", p.calls.Load(), b.health())
	}
	// Distinct routes, but too far apart: forgotten.
	b.failed("HEAD /org/a/resolve/main/x", false, "status 500")
	clk.Advance(suspectWindow + time.Second)
	b.failed("HEAD /org/b/resolve/main/x", false, "status 500")
	clk.Advance(suspectWindow + time.Second)
	b.failed("HEAD /org/c/resolve/main/x", false, "status 500")
	settle(b)
	if p.calls.Load() != 0 {
		t.Fatalf("failures a window apart made it probe")
	}
	b.failed("HEAD /org/d/resolve/main/x", false, "status 500")
	settle(b)
	if p.calls.Load() != 0 {
		t.Fatalf("two distinct routes failing made it probe")
	}
	b.failed("HEAD /org/e/resolve/main/x", false, "status 500")
	settle(b)
	if p.calls.Load() != 1 || !b.health().Up {
		t.Fatalf("%d distinct routes failing, probe answering: %d probes, %+v", suspectRoutes, p.calls.Load(), b.health())
	}
	for i := range 20 {
		b.failed("HEAD /org/f/resolve/main/"+string(rune('a'+i)), i%2 == 0, "status 500")
	}
	settle(b)
	if p.calls.Load() != 1 || !b.health().Up {
		t.Fatalf("within the cool-down after an answered probe: %d probes, %+v", p.calls.Load(), b.health())
	}
	clk.Advance(5 * time.Second)
	p.set(errors.New("HEAD / answered 503"))
	for _, r := range []string{"GET /x", "GET /y", "GET /z"} {
		b.failed(r, false, "status 503")
	}
	settle(b)
	if p.calls.Load() != 2 || b.health().Up {
		t.Fatalf("distinct routes failing and the probe failing: %d probes, %+v", p.calls.Load(), b.health())
	}
}

// Calls that arrive while a probe runs wait for its verdict, as long as
// their context lets them.
func TestBreakerCallsWaitForTheProbe(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1000, 0))
	release := make(chan struct{})
	started := make(chan struct{})
	b := newBreaker(5*time.Second, time.Minute, func(ctx context.Context) error {
		close(started)
		<-release
		return errors.New("no answer")
	}, clk.Now, slog.New(slog.DiscardHandler))
	b.failed("HEAD /f", true, "timeout")
	b.mu.Lock()
	probing := b.flight != nil
	b.mu.Unlock()
	if !probing {
		t.Fatal("a call with no answer did not start a probe")
	}
	<-started
	ctx, cancel := context.WithCancelCause(context.Background())
	gaveUp := errors.New("client left")
	cancel(gaveUp)
	if err := b.allow(ctx); !errors.Is(err, gaveUp) {
		t.Fatalf("a caller that left while the probe ran: %v", err)
	}
	done := make(chan error)
	go func() { done <- b.allow(context.Background()) }()
	close(release)
	if err := <-done; !errors.Is(err, errMarkedDown) {
		t.Fatalf("a caller that waited for a failed probe: %v", err)
	}
}

// hang answers nothing until the client gives up.
func hang(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// An upstream that accepts connections but never answers costs one metadata
// timeout and one probe; after that calls fail at once (so the cache answers
// at cache speed) until the probe, HEAD of the upstream and never a caller's
// own request, finds it answering again.
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
	clk := testutil.NewClock(time.Now())
	c.breaker.now = clk.Now
	repo := hub.MustRepo(hub.Model, "org/m")

	_, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: repo, Rev: "main", Path: "f.json"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("hung upstream: err = %v, want ErrUnavailable", err)
	}
	settle(c.breaker)
	sent := up.Count()
	if hits := up.Hits(); sent != 2 || hits[1].Method != http.MethodHead || hits[1].URI != "/" {
		t.Fatalf("want the resolve, then the probe HEAD /; got %+v", hits)
	}
	for i := 0; i < 20; i++ {
		if _, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: repo, Rev: "main", Path: "f.json"}); !errors.Is(err, ErrUnavailable) {
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
	clk.Advance(time.Hour)
	if _, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: repo, Rev: "main", Path: "f.json"}); err != nil {
		t.Fatalf("after the cool-down: %v", err)
	}
	if !c.Health().Up {
		t.Fatal("Health still down after an answer")
	}
	if hits := up.Hits()[sent:]; len(hits) != 2 || hits[0].URI != "/" || !strings.Contains(hits[1].URI, "/resolve/") {
		t.Fatalf("after the cool-down: want the probe HEAD /, then the resolve; got %+v", hits)
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
	_, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: hub.MustRepo(hub.Model, "org/m"), Rev: "main", Path: "f.json"})
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
	settle(c.breaker)
}
