package app_test

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// modelRelay stands between hubproxy and one of the fake hub's hosts (the hub
// or its CDN), so the access model can take that host away and give it back:
// refuse connections (the listener is closed, and reopened on the same
// port), hold every request until the caller gives up, or fail one path, as
// an upstream endpoint a client can pick on purpose. The fake hub's own fault
// injection (hubtest.Faults) covers 5xx and 429 everywhere; what it cannot
// do is come back after Close, or fail only one path.
type modelRelay struct {
	target  *url.URL
	addr    string // host:port, kept across close and reopen
	proxy   *httputil.ReverseProxy
	rewrite *strings.Replacer // absolute URLs in Location and Link answers

	mu sync.Mutex
	// Guarded by mu.
	srv      *http.Server
	hang     bool
	failPath string // requests whose escaped path starts with this answer failKind
	failHang bool   // hang on failPath instead of 503
	release  chan struct{}
}

// newModelRelay starts a relay to target on a loopback port of its own.
func newModelRelay(target string) (*modelRelay, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &modelRelay{target: u, addr: l.Addr().String(), release: make(chan struct{}), rewrite: strings.NewReplacer()}
	r.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = u.Host
		},
		Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 32},
		ModifyResponse: func(resp *http.Response) error {
			for _, k := range []string{"Location", "Link"} {
				if v := resp.Header.Get(k); v != "" {
					resp.Header.Set(k, r.rewrite.Replace(v))
				}
			}
			return nil
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	r.serve(l)
	return r, nil
}

// URL is the relay's base URL, the same before and after a close.
func (r *modelRelay) URL() string { return "http://" + r.addr }

func (r *modelRelay) serve(l net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ErrorLog: log.New(io.Discard, "", 0),
		ReadHeaderTimeout: 10 * time.Second}
	r.srv = srv
	go func() { _ = srv.Serve(l) }() // ends with ErrServerClosed on close
}

func (r *modelRelay) handle(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	hang, release := r.hang, r.release
	failing := r.failPath != "" && strings.HasPrefix(req.URL.EscapedPath(), r.failPath)
	failHang := r.failHang
	r.mu.Unlock()
	if hang || failing && failHang {
		// Hold the request until its caller gives up or the relay is
		// told to stop hanging; a released request is then answered.
		select {
		case <-req.Context().Done():
			return
		case <-release:
		}
	} else if failing {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"Service Unavailable"}`)
		return
	}
	r.proxy.ServeHTTP(w, req)
}

// setRewrite makes Location and Link headers that name old name new instead
// (pairs), so redirects to the CDN go through the CDN's relay.
func (r *modelRelay) setRewrite(pairs ...string) { r.rewrite = strings.NewReplacer(pairs...) }

// set puts the relay in one state: gone (connections refused), hung, a
// failing path (503, or hung with failHang), or up when all are zero.
func (r *modelRelay) set(gone, hang bool, failPath string, failHang bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hang && !hang || r.failHang && !failHang {
		close(r.release)
		r.release = make(chan struct{})
	}
	r.hang, r.failPath, r.failHang = hang, failPath, failHang
	switch {
	case gone && r.srv != nil:
		err := r.srv.Close()
		r.srv = nil
		return err
	case !gone && r.srv == nil:
		l, err := listenAgain(r.addr)
		if err != nil {
			return err
		}
		r.serve(l)
	}
	return nil
}

// listenAgain reopens addr; the port was ours a moment ago, so a failure is
// only the kernel not having let go of it yet.
func listenAgain(addr string) (net.Listener, error) {
	var err error
	for range 50 {
		var l net.Listener
		if l, err = net.Listen("tcp", addr); err == nil {
			return l, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

// close stops the relay for good.
func (r *modelRelay) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.release)
	r.release = make(chan struct{})
	r.hang, r.failHang = false, false
	if r.srv != nil {
		r.srv.Close()
		r.srv = nil
	}
	r.proxy.Transport.(*http.Transport).CloseIdleConnections()
}
