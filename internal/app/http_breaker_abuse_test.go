package app_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// frontDoor stands between the proxy and the fake hub: any path holding
// "evil" or ending in "/discussions" answers 500 (routes a client can name
// that fail), and with down set every request answers 503, the front page
// (the breaker's probe) included. Everything else reaches the hub.
type frontDoor struct {
	*httptest.Server
	down     atomic.Bool
	requests atomic.Int64
	probes   atomic.Int64 // HEAD /, the breaker's probe
}

// withFrontDoor puts a frontDoor before the hub the config names.
func withFrontDoor(t *testing.T, fd **frontDoor, more func(*app.Config)) func(*app.Config) {
	return func(c *app.Config) {
		target, err := url.Parse(c.Upstream)
		if err != nil {
			t.Fatal(err)
		}
		hubProxy := httputil.NewSingleHostReverseProxy(target)
		f := &frontDoor{}
		f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.requests.Add(1)
			if r.Method == http.MethodHead && r.URL.Path == "/" {
				f.probes.Add(1)
			}
			switch p := r.URL.Path; {
			case f.down.Load():
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusServiceUnavailable)
			case strings.Contains(p, "evil") || strings.HasSuffix(p, "/discussions"):
				w.WriteHeader(http.StatusInternalServerError)
			default:
				hubProxy.ServeHTTP(w, r)
			}
		}))
		t.Cleanup(f.Close)
		c.Upstream = f.URL
		*fd = f
		if more != nil {
			more(c)
		}
	}
}

// The security review's finding, end to end: a client relays requests to a
// route that answers 500 (a POST to discussions, re-sent again and again),
// and names failing repos and files on the routes hubproxy resolves itself.
// None of it marks the hub down: another caller's download of an uncached
// public file still goes upstream and succeeds, and /readyz and
// hubproxy_upstream_up say the upstream is up.
func TestClientChosenFailuresDoNotMarkTheUpstreamDown(t *testing.T) {
	var fd *frontDoor
	e := newEnv(t, hubtest.Options{}, withFrontDoor(t, &fd, nil))
	data := hubtest.RandomBytes(61, 200<<10)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "w.bin", Data: data}}})

	for i := range 10 {
		req, _ := http.NewRequest(http.MethodPost, e.Proxy.URL+"/api/models/org/model/discussions",
			strings.NewReader(`{"title":"x","description":"y"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("relayed POST: %d, want the upstream's 500", resp.StatusCode)
		}
		if i >= 2 {
			continue // a GET is retried (backoffs of 100ms and up); two make the point
		}
		if code, _ := statusOf(e, http.MethodGet, "/api/models/org/model/discussions", ""); code != http.StatusInternalServerError {
			t.Fatalf("relayed GET: %d, want the upstream's 500", code)
		}
	}
	for _, evil := range []string{"evil1", "evil2", "evil3"} {
		if code, _ := statusOf(e, http.MethodGet, "/api/models/org/"+evil+"/revision/main", ""); code < 500 {
			t.Fatalf("repo info of a failing route: %d", code)
		}
		if code, _ := statusOf(e, http.MethodGet, "/org/"+evil+"/resolve/main/x.bin", ""); code < 500 {
			t.Fatalf("a file on a failing route: %d", code)
		}
	}

	if fd.probes.Load() == 0 {
		t.Error("distinct failing routes never made hubproxy ask its probe")
	}
	if code, body := statusOf(e, http.MethodGet, "/org/model/resolve/main/w.bin", ""); code != 200 || !bytes.Equal(body, data) {
		t.Fatalf("uncached public file after the failures: %d, %d bytes; want 200 and its bytes", code, len(body))
	}
	if resp, body := e.Do(http.MethodGet, "/readyz"); resp.StatusCode != 200 || !strings.Contains(string(body), `"upstream":"up"`) {
		t.Errorf("/readyz after the failures: %d %s", resp.StatusCode, body)
	}
	if _, m := e.Do(http.MethodGet, "/metrics"); !strings.Contains(string(m), "hubproxy_upstream_up 1") {
		t.Error("/metrics lacks hubproxy_upstream_up 1")
	}
}

// A genuine outage, every call failing across distinct files, still marks
// the hub down: past the first few files, cached ones are served without
// asking it at all, and /readyz and hubproxy_upstream_up say it is down.
func TestGenuineOutageStillMarksTheUpstreamDown(t *testing.T) {
	for _, kind := range []string{"503", "refused"} {
		t.Run(kind, func(t *testing.T) {
			var fd *frontDoor
			e := newEnv(t, hubtest.Options{}, withFrontDoor(t, &fd, func(c *app.Config) { c.UpstreamCooldown = time.Hour }))
			files := map[string][]byte{}
			var spec []hubtest.File
			for i, name := range []string{"a.bin", "b.bin", "c.bin", "d.bin", "e.bin"} {
				files[name] = hubtest.RandomBytes(uint64(70+i), 64<<10)
				spec = append(spec, hubtest.File{Path: name, Data: files[name]})
			}
			e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: spec})
			get := func(name string) {
				t.Helper()
				if code, body := statusOf(e, http.MethodGet, "/org/model/resolve/main/"+name, ""); code != 200 || !bytes.Equal(body, files[name]) {
					t.Fatalf("%s: %d, %d bytes", name, code, len(body))
				}
			}
			for name := range files {
				get(name)
			}
			e.Start() // forget the resolutions: each file below asks upstream, or not
			if kind == "503" {
				fd.down.Store(true)
			} else {
				fd.Close()
			}
			for _, name := range []string{"a.bin", "b.bin", "c.bin"} {
				get(name)
			}
			// The probe those failures started runs in the background: wait
			// for its verdict (an event, not a duration) before counting.
			for deadline := time.Now().Add(20 * time.Second); ; {
				_, body := e.Do(http.MethodGet, "/readyz")
				if strings.Contains(string(body), `"upstream":"down"`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("three files failing on every route never marked the hub down: %s", body)
				}
				time.Sleep(10 * time.Millisecond)
			}
			before := fd.requests.Load()
			get("d.bin")
			get("e.bin")
			if n := fd.requests.Load() - before; n != 0 {
				t.Errorf("the failing hub was asked %d times once marked down", n)
			}
			if resp, body := e.Do(http.MethodGet, "/readyz"); resp.StatusCode != 200 || !strings.Contains(string(body), `"upstream":"down"`) {
				t.Errorf("/readyz during the outage: %d %s", resp.StatusCode, body)
			}
			if _, m := e.Do(http.MethodGet, "/metrics"); !strings.Contains(string(m), "hubproxy_upstream_up 0") {
				t.Error("/metrics lacks hubproxy_upstream_up 0")
			}
		})
	}
}
