package harness

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func TestFixedRangeLoad(t *testing.T) {
	data := make([]byte, 1<<20)
	srv := serveBytes(t, data)
	res, err := fixedRangeLoad(context.Background(), srv.URL+"/f?x=1", int64(len(data)), 4096, 4, 200*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.requests == 0 || len(res.latencies) != res.requests || !slices.IsSorted(res.latencies) {
		t.Fatalf("%d requests, %d latencies (sorted: %v)", res.requests, len(res.latencies), slices.IsSorted(res.latencies))
	}
	if res.bytes != int64(res.requests)*4096 {
		t.Errorf("%d bytes for %d requests of 4 KiB", res.bytes, res.requests)
	}
	if res.dials != 4 {
		t.Errorf("%d dials for 4 keep-alive connections", res.dials)
	}
	if res.clientCPU <= 0 || res.machineCPU <= 0 {
		t.Errorf("client CPU %v, machine CPU %v", res.clientCPU, res.machineCPU)
	}
}

// TestFixedRangeLoadChunkedAndClose: a chunked body is read through its
// trailer, and a server that closes every connection is dialled again.
func TestFixedRangeLoadChunkedAndClose(t *testing.T) {
	var reqs atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a, b int64
		if _, err := parseTestRange(r.Header.Get("Range"), &a, &b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if reqs.Add(1)%2 == 0 {
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(http.StatusPartialContent) // no Content-Length: chunked
		half := (b - a + 1) / 2
		_, _ = w.Write(make([]byte, half))
		w.(http.Flusher).Flush()
		_, _ = w.Write(make([]byte, b-a+1-half))
	}))
	t.Cleanup(srv.Close)
	res, err := fixedRangeLoad(context.Background(), srv.URL, 1<<20, 1000, 2, 200*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.requests < 4 || res.dials < res.requests/2 {
		t.Errorf("%d requests on %d connections; want a new connection after every close", res.requests, res.dials)
	}
}

func TestFixedRangeLoadRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		check   func(error) bool
	}{
		{"whole body", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(make([]byte, 1<<16)) },
			func(err error) bool { var se *StatusError; return errors.As(err, &se) && se.Status == http.StatusOK }},
		{"short body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "10")
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write(make([]byte, 10))
		}, func(err error) bool { return errors.Is(err, ErrShort) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			t.Cleanup(srv.Close)
			_, err := fixedRangeLoad(context.Background(), srv.URL, 1<<16, 100, 2, time.Second, 1)
			if !tc.check(err) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// parseTestRange parses "bytes=a-b" into a and b.
func parseTestRange(h string, a, b *int64) (int, error) {
	const p = "bytes="
	if len(h) < len(p) || h[:len(p)] != p {
		return 0, errors.New("no range")
	}
	for i := len(p); i < len(h); i++ {
		if h[i] == '-' {
			var err1, err2 error
			*a, err1 = strconv.ParseInt(h[len(p):i], 10, 64)
			*b, err2 = strconv.ParseInt(h[i+1:], 10, 64)
			return 2, errors.Join(err1, err2)
		}
	}
	return 0, errors.New("bad range")
}
