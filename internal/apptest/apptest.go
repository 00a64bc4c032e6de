// Package apptest runs one whole hubproxy (app.Build, as serve runs it) in
// front of one fake hub (internal/hubtest), inside the test binary: for the
// tests that drive the product end to end through its listeners,
// internal/app's and internal/admin's. Only tests import it.
package apptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// BlockSize is the cache block size an Env runs with unless tweaked: small,
// so that tests see many blocks in little data.
const BlockSize = 64 << 10

// Env is one fake hub plus one hubproxy in front of it.
type Env struct {
	T     *testing.T
	Hub   *hubtest.Hub
	Proxy *httptest.Server // the public listener of the running proxy
	Admin http.Handler     // the admin API of the running proxy
	S3    *httptest.Server // the S3 API listener of the running proxy (s3-listen)
	Dir   string           // the cache directory, kept across restarts
	Cfg   app.Config       // what Start builds from

	stop func()
}

// New starts a fake hub with hopts and a hubproxy over it, on a fresh
// cache directory, with tweak applied to its configuration; both stop
// when the test ends.
func New(t *testing.T, hopts hubtest.Options, tweak func(*app.Config)) *Env {
	t.Helper()
	h := hubtest.NewT(t, hopts)
	e := &Env{T: t, Hub: h, Dir: t.TempDir()}
	e.Cfg = app.Config{Upstream: h.URL, CacheDir: e.Dir, BlockSize: BlockSize}
	if tweak != nil {
		tweak(&e.Cfg)
	}
	e.Start()
	return e
}

// Start (re)starts hubproxy from Cfg, on the same cache directory; only one
// process may hold a cache directory, so a running proxy is stopped first.
func (e *Env) Start() {
	e.T.Helper()
	e.Stop()
	h, err := app.Build(e.Cfg, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	proxy := httptest.NewServer(h.Main)
	s3 := httptest.NewServer(h.S3)
	e.Proxy, e.Admin, e.S3 = proxy, h.Admin, s3
	var once sync.Once
	e.stop = func() { once.Do(func() { proxy.Close(); s3.Close(); h.Close() }) }
	e.T.Cleanup(e.stop)
}

// Stop stops the running proxy, if any; Start runs it again.
func (e *Env) Stop() {
	if e.stop != nil {
		e.stop()
	}
}

// Do sends a request to the public listener, hdr being header names and
// values in turn, and returns the response with its whole body.
func (e *Env) Do(method, path string, hdr ...string) (*http.Response, []byte) {
	e.T.Helper()
	req, err := http.NewRequest(method, e.Proxy.URL+path, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.T.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp, body
}
