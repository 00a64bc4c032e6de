package main

import (
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/netlimit"
)

// listenMain opens the hub API's listener, holding at most max-connections
// open at once, and exposes its counts on reg (nil: not exposed).
func listenMain(cfg app.Config, reg prometheus.Registerer) (*netlimit.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	waits := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "hubproxy", Name: "connections_capped_total",
		Help: "Times the hub API had max-connections open and a new connection waited for one to close."})
	l := netlimit.Limit(ln, netlimit.Options{Max: cfg.MaxConnections, OnWait: waits.Inc})
	if reg != nil {
		reg.MustRegister(waits, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "hubproxy", Name: "connections_open",
			Help: "Connections open on the hub API's listener."}, func() float64 { return float64(l.Open()) }))
	}
	return l, nil
}

// newMainServer is the hub API's http.Server. Each phase a client
// controls is bounded: its headers (ReadHeaderTimeout), the whole request,
// body included (ReadTimeout, request-read-timeout: without it a body
// dribbled a byte at a time held the connection forever), and the wait for
// the next request on a kept-alive connection (IdleTimeout). ReadTimeout
// never cuts a response: net/http lifts the read deadline once the body is
// read, and a download has no body. inflight counts the requests being
// served, for the shutdown log.
func newMainServer(cfg app.Config, h http.Handler, inflight *atomic.Int64) *http.Server {
	return &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inflight.Add(1)
			defer inflight.Add(-1)
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       cfg.RequestReadTimeout,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
	}
}
