package repoapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// fakeUpstream answers every API call with body after release is closed,
// counting calls.
type fakeUpstream struct {
	calls   atomic.Int32
	release chan struct{}
	status  int
	body    string
}

func (u *fakeUpstream) API(ctx context.Context, method, pathAndQuery, auth string, header http.Header, body []byte) (*http.Response, error) {
	u.calls.Add(1)
	if u.release != nil {
		select {
		case <-u.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	h := http.Header{"Content-Type": {"application/json"}, "Link": {`<https://hub.test/api/models/org/m/tree/main?cursor=2>; rel="next"`}}
	return &http.Response{StatusCode: u.status, Header: h, Body: io.NopCloser(strings.NewReader(u.body))}, nil
}

func (u *fakeUpstream) Relay(ctx context.Context, method, pathAndQuery, auth string, header http.Header, body []byte) (*http.Response, error) {
	return u.API(ctx, method, pathAndQuery, auth, header, body)
}

func (u *fakeUpstream) Upstream() *url.URL { return &url.URL{Scheme: "https", Host: "hub.test"} }

type memStore struct {
	mu   sync.Mutex
	meta map[string][]byte
	refs map[string]string
}

func newMemStore() *memStore { return &memStore{meta: map[string][]byte{}, refs: map[string]string{}} }

func (m *memStore) WriteRef(repo hub.Repo, rev, commit string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refs[repo.String()+"@"+rev] = commit
	return nil
}

func (m *memStore) PutMeta(key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.meta[key] = data
	return nil
}

func (m *memStore) GetMeta(key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.meta[key]; ok {
		return b, nil
	}
	return nil, errors.New("not cached")
}

// fakePolicy reuses answers for ttl and replays them when replay is nil.
type fakePolicy struct {
	ttl       time.Duration
	now       func() time.Time
	replay    error
	notPublic atomic.Int32
}

func (p *fakePolicy) AnsweredMetadata(hub.Caller, hub.Repo, error) {}
func (p *fakePolicy) NotPublic(hub.Repo)                           { p.notPublic.Add(1) }
func (p *fakePolicy) Reusable(_ string, stored time.Time) bool {
	return p.now().Sub(stored) < p.ttl
}
func (p *fakePolicy) MayReplayMetadata(hub.Caller, hub.Repo, time.Time) error { return p.replay }

func infoRequest(t *testing.T, auth string) Request {
	t.Helper()
	u, err := hub.ParseAPIURL("/api/models/org/m/revision/main")
	if err != nil {
		t.Fatal(err)
	}
	return Request{URL: u, Method: http.MethodGet, PathAndQuery: "/api/models/org/m/revision/main", Caller: hub.NewCaller(auth), PublicBase: "http://proxy:8080"}
}

func read(t *testing.T, resp *Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// N identical cold requests of one caller make one upstream call, and each
// gets the answer; the upstream bytes are charged once.
func TestColdMissesShareOneUpstreamCall(t *testing.T) {
	up := &fakeUpstream{release: make(chan struct{}), status: 200, body: `{"id":"org/m","sha":"0123456789abcdef0123456789abcdef01234567","siblings":[{"rfilename":"a","xetHash":"x"}]}`}
	now := time.Now
	s := New(Options{Policy: &fakePolicy{ttl: time.Minute, now: now}, Store: newMemStore(), Upstream: up})
	const n = 8
	var wg sync.WaitGroup
	var charged atomic.Int64
	bodies := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.Do(context.Background(), infoRequest(t, "Bearer hf_a"))
			if err != nil {
				t.Error(err)
				return
			}
			charged.Add(resp.UpstreamBytes)
			bodies[i] = read(t, resp)
		}()
	}
	// Let every request join the flight before upstream answers.
	req := infoRequest(t, "Bearer hf_a")
	testutil.Eventually(t, 10*time.Second, "every request waiting on the flight", func() bool {
		return s.flights.Waiting(metaKey(req.Caller, req.Method, req.PathAndQuery, "", nil)) == n
	})
	close(up.release)
	wg.Wait()
	if c := up.calls.Load(); c != 1 {
		t.Errorf("%d upstream calls for %d identical cold requests, want 1", c, n)
	}
	for i, b := range bodies {
		if strings.Contains(b, "xetHash") || !strings.Contains(b, `"rfilename":"a"`) {
			t.Errorf("request %d got %q", i, b)
		}
	}
	if charged.Load() != int64(len(up.body)) {
		t.Errorf("charged %d upstream bytes in all, want %d (once)", charged.Load(), len(up.body))
	}
	// A later request is a hit, with Link on the proxy.
	resp, err := s.Do(context.Background(), infoRequest(t, "Bearer hf_a"))
	if err != nil || resp.Source != Hit {
		t.Fatalf("warm request: %v, source %q", err, resp.Source)
	}
	if l := resp.Header.Get("Link"); !strings.HasPrefix(l, "<http://proxy:8080/api/") {
		t.Errorf("Link %q is not on the proxy", l)
	}
}

// Two callers never share a flight: each gets upstream's answer for itself.
func TestCallersDoNotShareAnswers(t *testing.T) {
	up := &fakeUpstream{status: 200, body: `{"id":"org/m"}`}
	s := New(Options{Policy: &fakePolicy{ttl: time.Minute, now: time.Now}, Store: newMemStore(), Upstream: up})
	for _, auth := range []string{"", "Bearer hf_a", "Bearer hf_b"} {
		resp, err := s.Do(context.Background(), infoRequest(t, auth))
		if err != nil || resp.Source != Miss {
			t.Fatalf("caller %q: %v, source %q; want a miss of its own", auth, err, resp.Source)
		}
		resp.Body.Close()
	}
	if c := up.calls.Load(); c != 3 {
		t.Errorf("%d upstream calls for three callers, want 3", c)
	}
}

// An unavailable upstream is answered from the cache only as the policy
// allows, and the refusal names both causes.
func TestOutageFallbackAsPolicyAllows(t *testing.T) {
	up := &fakeUpstream{status: 200, body: `{"id":"org/m"}`}
	clock := time.Now()
	pol := &fakePolicy{ttl: time.Minute, now: func() time.Time { return clock }}
	s := New(Options{Policy: pol, Store: newMemStore(), Upstream: up, Now: func() time.Time { return clock }})
	resp, err := s.Do(context.Background(), infoRequest(t, "Bearer hf_a"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	clock = clock.Add(2 * time.Minute) // past reuse: upstream is asked
	up.status = http.StatusServiceUnavailable
	resp, err = s.Do(context.Background(), infoRequest(t, "Bearer hf_a"))
	if err != nil || resp.Source != Hit {
		t.Fatalf("outage with a replayable answer: %v", err)
	}
	resp.Body.Close()
	pol.replay = errors.New("cannot verify")
	if _, err = s.Do(context.Background(), infoRequest(t, "Bearer hf_a")); err == nil || !strings.Contains(err.Error(), "cannot verify") || !errors.Is(err, pol.replay) {
		t.Fatalf("outage without the policy's leave: %v", err)
	}
	if !strings.Contains(err.Error(), "503") {
		t.Errorf("refusal %q does not name the outage", err)
	}
	var se *fetch.StatusError
	if errors.As(err, &se) {
		t.Errorf("refusal is upstream's status error %v, want the policy's", se)
	}
}
