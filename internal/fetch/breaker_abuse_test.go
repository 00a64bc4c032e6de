package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// flakyHub is a fake upstream: HEAD / (the breaker's probe) answers 200,
// any path containing "bad" answers 500, resolves of anything else answer
// with file metadata; with down set, everything answers 503, probe included.
type flakyHub struct {
	*fakeServer
	down atomic.Bool
}

func newFlakyHub(t *testing.T) *flakyHub {
	f := &flakyHub{}
	ok := headHandler(map[string]string{"X-Repo-Commit": testCommit, "ETag": `"` + wantGit + `"`, "Content-Length": "3"})
	f.fakeServer = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case f.down.Load():
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
		case strings.Contains(r.URL.Path, "bad"):
			w.WriteHeader(http.StatusInternalServerError)
		case r.URL.Path == "/":
			w.WriteHeader(http.StatusOK)
		default:
			ok(w, r)
		}
	})
	return f
}

// probes counts the breaker's probes the fake saw.
func (f *flakyHub) probes() int {
	n := 0
	for _, h := range f.Hits() {
		if h.Method == http.MethodHead && h.URI == "/" {
			n++
		}
	}
	return n
}

func relay(t *testing.T, c *Client, method, path string) (int, error) {
	t.Helper()
	var body []byte
	if method == http.MethodPost {
		body = []byte(`{"title":"x"}`)
	}
	resp, err := c.Relay(context.Background(), method, path, "", http.Header{"Content-Type": {"application/json"}}, body)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// The security review's finding: one POST relayed to a route that answers
// 500 opened the breaker for the whole process. A client's relayed request,
// whatever its method, route or body, never reaches the breaker: it is
// neither counted nor sent as a probe, and hubproxy does not even probe.
func TestRelayedFailuresNeverMarkTheUpstreamDown(t *testing.T) {
	up := newFlakyHub(t)
	c := newClient(t, up.URL, nil)
	for i := range 10 {
		for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			code, err := relay(t, c, m, fmt.Sprintf("/api/models/org/bad%d/discussions", i))
			if err != nil || code != http.StatusInternalServerError {
				t.Fatalf("relay %s %d: %d, %v; want the upstream's 500 passed back", m, i, code, err)
			}
		}
	}
	settle(c.breaker)
	if h := c.Health(); !h.Up || !h.Checked.IsZero() || up.probes() != 0 {
		t.Fatalf("after 30 failing relays: %+v, %d probes; want up, unchecked, never probed", h, up.probes())
	}
	if _, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: hub.MustRepo(hub.Model, "org/m"), Rev: "main", Path: "f.json"}); err != nil {
		t.Fatalf("a normal resolve after the relays: %v", err)
	}
}

// hubproxy's own calls failing on routes a client named (distinct files,
// distinct repos' info) make it ask its probe once; the probe answers, so
// the upstream stays up and normal calls go through, and for a cool-down
// no more probes follow, however many routes fail.
func TestFailingRoutesDoNotMarkAnAnsweringUpstreamDown(t *testing.T) {
	up := newFlakyHub(t)
	c := newClient(t, up.URL, nil)
	clk := testutil.NewClock(time.Now())
	c.breaker.now = clk.Now
	ctx := context.Background()
	for i := range 10 {
		if _, err := c.Resolve(ctx, "", hub.FileRef{Repo: hub.MustRepo(hub.Model, fmt.Sprintf("org/bad%d", i)), Rev: "main", Path: "f.json"}); err == nil {
			t.Fatalf("resolve %d of a failing route succeeded", i)
		}
		resp, err := c.API(ctx, http.MethodGet, fmt.Sprintf("/api/models/org/bad%d/revision/main", i), "", http.Header{}, nil)
		if err != nil || resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("API %d: %v", i, err)
		}
		resp.Body.Close()
		settle(c.breaker)
	}
	if h := c.Health(); !h.Up || up.probes() != 1 {
		t.Fatalf("20 distinct routes failing, probe answering: %+v, %d probes; want up after one probe", h, up.probes())
	}
	if _, err := c.Resolve(ctx, "", hub.FileRef{Repo: hub.MustRepo(hub.Model, "org/m"), Rev: "main", Path: "f.json"}); err != nil {
		t.Fatalf("a normal resolve: %v", err)
	}
}

// A real outage, 5xx on every route and on the probe, still opens the
// breaker after a few distinct calls; then calls, relays too, fail at once
// without reaching the upstream. After the cool-down a relay only triggers
// hubproxy's own probe: it is never sent as one, so a client re-sending a
// failing request cannot keep the breaker open once the upstream is back.
func TestOutageOpensAndOnlyTheOwnProbeCloses(t *testing.T) {
	up := newFlakyHub(t)
	c := newClient(t, up.URL, func(o *Options) { o.Cooldown = time.Minute })
	clk := testutil.NewClock(time.Now())
	c.breaker.now = clk.Now
	ctx := context.Background()
	up.down.Store(true)
	for _, f := range []string{"a.json", "b.json", "c.json"} {
		if _, err := c.Resolve(ctx, "", hub.FileRef{Repo: hub.MustRepo(hub.Model, "org/m"), Rev: "main", Path: f}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("resolve %s: %v", f, err)
		}
	}
	settle(c.breaker)
	if h := c.Health(); h.Up || !strings.Contains(h.Reason, "503") {
		t.Fatalf("5xx everywhere: %+v; want down", h)
	}
	sent := up.Count()
	if _, err := c.Resolve(ctx, "", hub.FileRef{Repo: hub.MustRepo(hub.Model, "org/m"), Rev: "main", Path: "d.json"}); !errors.Is(err, errMarkedDown) {
		t.Fatalf("resolve while down: %v", err)
	}
	if _, err := relay(t, c, http.MethodPost, "/api/models/org/bad/discussions"); !errors.Is(err, errMarkedDown) {
		t.Fatalf("relay while down: %v", err)
	}
	if up.Count() != sent {
		t.Fatalf("the upstream saw %d requests while marked down", up.Count()-sent)
	}

	// Back, except for the route the client keeps naming.
	up.down.Store(false)
	clk.Advance(time.Minute)
	if code, err := relay(t, c, http.MethodPost, "/api/models/org/bad/discussions"); err != nil || code != http.StatusInternalServerError {
		t.Fatalf("relay after the cool-down: %d, %v", code, err)
	}
	if hits := up.Hits()[sent:]; len(hits) != 2 || hits[0].URI != "/" || hits[0].Method != http.MethodHead {
		t.Fatalf("after the cool-down: want the probe HEAD /, then the relay; got %+v", hits)
	}
	if h := c.Health(); !h.Up {
		t.Fatalf("the probe answered, yet: %+v", h)
	}
	if code, err := relay(t, c, http.MethodPost, "/api/models/org/bad/discussions"); err != nil || code != 500 || !c.Health().Up {
		t.Fatalf("relaying the failing route again: %d, %v, %+v", code, err, c.Health())
	}
}

// Connection refused is no answer at all: the first call that meets it
// makes the breaker probe, the probe is refused too, and the next calls
// fail at once.
func TestRefusedConnectionsOpenAtOnce(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	c := newClient(t, gone.URL, nil)
	repo := hub.MustRepo(hub.Model, "org/m")
	if _, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: repo, Rev: "main", Path: "f.json"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("refused: %v", err)
	}
	settle(c.breaker)
	if h := c.Health(); h.Up || !strings.Contains(h.Reason, "refused") {
		t.Fatalf("after a refused call: %+v", h)
	}
	if _, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: repo, Rev: "main", Path: "g.json"}); !errors.Is(err, errMarkedDown) {
		t.Fatalf("the next call: %v; want it refused at once", err)
	}
	if err := c.Ping(context.Background()); !errors.Is(err, errMarkedDown) {
		t.Fatalf("Ping during the cool-down: %v", err)
	}
}
