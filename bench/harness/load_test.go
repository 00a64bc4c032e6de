package harness

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

func TestRangeLoad(t *testing.T) {
	data := make([]byte, 1<<20)
	srv := serveBytes(t, data)
	res, err := rangeLoad(context.Background(), srv.URL, int64(len(data)), 4096, 64<<10, 4, 200*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.requests == 0 || len(res.latencies) != res.requests || !slices.IsSorted(res.latencies) {
		t.Fatalf("%d requests, %d latencies (sorted: %v)", res.requests, len(res.latencies), slices.IsSorted(res.latencies))
	}
	if res.bytes < int64(res.requests)*4096 || res.bytes > int64(res.requests)*(64<<10) {
		t.Errorf("%d bytes for %d requests of 4–64 KiB", res.bytes, res.requests)
	}
}

// TestRangeLoadRejectsWholeBodies: a server that ignores Range must fail the
// run, not inflate it.
func TestRangeLoadRejectsWholeBodies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 1<<16))
	}))
	t.Cleanup(srv.Close)
	_, err := rangeLoad(context.Background(), srv.URL, 1<<16, 100, 1000, 2, time.Second, 1)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusOK {
		t.Fatalf("err = %v, want a StatusError for the 200", err)
	}
}
