package fetch

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Secrets the tests hand to the client; no error text may ever contain them.
const (
	proxyToken  = "hf_proxyTOKENsecret0123456789"
	callerToken = "hf_callerTOKENsecret9876543210"
	callerAuth  = "Bearer " + callerToken
)

const testCommit = "0123456789abcdef0123456789abcdef01234567"

// hit is one request a fake server saw.
type hit struct {
	Method string
	URI    string // RequestURI, escaped as sent
	Header http.Header
}

// fakeServer is an httptest server that records every request before
// handing it to its handler.
type fakeServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []hit
}

func newServer(t *testing.T, h http.HandlerFunc) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits = append(f.hits, hit{Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone()})
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) Hits() []hit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]hit(nil), f.hits...)
}

func (f *fakeServer) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hits)
}

// newClient builds a client on upstream with the proxy token and backoffs
// shrunk to milliseconds, so retry tests stay fast without timing asserts.
func newClient(t *testing.T, upstream string, mod func(*Options)) *Client {
	t.Helper()
	opts := Options{Upstream: upstream, Token: proxyToken}
	if mod != nil {
		mod(&opts)
	}
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c.backoffMin = time.Millisecond
	c.backoffMax = 4 * time.Millisecond
	c.retryAfterMax = 10 * time.Millisecond
	return c
}

// noSecrets fails the test if err's text carries a credential or a query.
func noSecrets(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	for _, s := range []string{proxyToken, callerToken, "sig=", "SIGNATURE"} {
		if strings.Contains(msg, s) {
			t.Errorf("error text leaks %q: %s", s, msg)
		}
	}
}

// headHandler answers a resolve HEAD with the given metadata headers.
func headHandler(headers map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(http.StatusOK)
	}
}
