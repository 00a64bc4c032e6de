package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hubproxy/hubproxy/internal/app"
)

// serveMain runs the hub API's server, as serve builds it, on loopback
// with handler h.
func serveMain(t *testing.T, cfg app.Config, reg prometheus.Registerer, h http.Handler) string {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	ln, err := listenMain(cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	var inflight atomic.Int64
	srv := newMainServer(cfg, h, &inflight)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// A body dribbled a byte at a time no longer holds a connection open: once
// request-read-timeout has passed, the handler's read fails and the server
// closes the connection, however slowly bytes still come.
func TestDribbledBodyIsCut(t *testing.T) {
	cfg := app.Defaults()
	cfg.RequestReadTimeout = 200 * time.Millisecond
	readErr := make(chan error, 1)
	addr := serveMain(t, cfg, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		if err != nil {
			http.Error(w, "body too slow", http.StatusRequestTimeout)
		}
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /api/models/org/m/paths-info/main HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	stop := make(chan struct{})
	defer close(stop)
	go func() { // one byte every 20ms: never idle long, never done
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	// A generous bound, far beyond the deadline, only so that a broken
	// server fails the test rather than hanging it.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the connection was still open 20s after the body deadline")
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the handler's read ended with %v, want the deadline", err)
		}
	default:
		t.Error("the connection closed before the handler's read ended")
	}
}

// The deadline bounds reading the request only: a response streamed long
// after it is not cut, and its request's context stays alive.
func TestReadTimeoutSparesTheResponse(t *testing.T) {
	cfg := app.Defaults()
	cfg.RequestReadTimeout = 50 * time.Millisecond
	release := make(chan struct{})
	addr := serveMain(t, cfg, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.Write([]byte("first;"))
		w.(http.Flusher).Flush()
		select {
		case <-release: // the client saw the first part, well after the deadline
		case <-r.Context().Done():
			return
		}
		w.Write([]byte("second"))
	}))
	resp, err := http.Post("http://"+addr+"/x", "application/json", strings.NewReader(`{"paths":["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString(';')
	if err != nil || first != "first;" {
		t.Fatalf("first part %q, %v", first, err)
	}
	// Outlast the deadline by an order of magnitude before releasing.
	time.Sleep(10 * cfg.RequestReadTimeout)
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second" {
		t.Errorf("the response was cut after the body deadline: %q, %v", rest, err)
	}
}

// At max-connections, a new connection is not served until one closes,
// and the wait is counted.
func TestMaxConnectionsHolds(t *testing.T) {
	cfg := app.Defaults()
	cfg.MaxConnections = 2
	reg := prometheus.NewRegistry()
	entered := make(chan string, 3)
	release := make(chan struct{}, 3)
	addr := serveMain(t, cfg, reg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- r.URL.Path
		<-release
		w.Header().Set("Connection", "close")
	}))
	send := func(path string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		return c
	}
	send("/1")
	send("/2")
	<-entered
	<-entered
	send("/3") // TCP accepts it (the kernel's queue); the server must not
	for metric(t, reg, "hubproxy_connections_capped_total") < 1 {
		select {
		case p := <-entered:
			t.Fatalf("%s was served while 2 connections were open", p)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got := metric(t, reg, "hubproxy_connections_open"); got != 2 {
		t.Errorf("connections_open = %v, want 2", got)
	}
	release <- struct{}{} // one of the first two answers and closes
	if p := <-entered; p != "/3" {
		t.Errorf("served %s, want /3", p)
	}
	close(release)
}

// metric is the value of reg's one sample named name, a counter or a gauge.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			if c := mf.Metric[0].GetCounter(); c != nil {
				return c.GetValue()
			}
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
