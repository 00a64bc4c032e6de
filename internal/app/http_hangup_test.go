package app_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// Clients that read the start of "Range: bytes=N-" and hang up cost upstream
// about what they read plus what was already on its way for them, not the
// read-ahead that would have followed: read-ahead belongs to its reader and
// is cancelled when the reader leaves, so once every client has gone no fill
// keeps running for them.
func TestClientsThatHangUpDoNotCostReadAhead(t *testing.T) {
	e := newEnv(t, hubtest.Options{BandwidthPerConn: 1 << 20}, nil)
	const size = 96 << 20
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{{Path: "w.safetensors", Data: hubtest.RandomBytes(51, size)}}})
	e.Hub.ResetCounters()
	// At 1 MiB/s per connection a chunk takes 8 s: fills left running for
	// gone readers would still be in flight long after settled gives up.
	fillsRE := regexp.MustCompile(`(?m)^hubproxy_cache_fills_in_flight (\d+)`)
	settled := func(after string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, m := e.Do(http.MethodGet, "/metrics")
			match := fillsRE.FindSubmatch(m)
			if match == nil {
				t.Fatal("no hubproxy_cache_fills_in_flight in /metrics")
			}
			if n, _ := strconv.Atoi(string(match[1])); n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s fills still in flight 5 s after %s", match[1], after)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	const clients, read = 5, 256 << 10
	for i := range clients {
		req, _ := http.NewRequest(http.MethodGet, e.Proxy.URL+"/org/model/resolve/main/w.safetensors", nil)
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", int64(i)*(size/clients)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, resp.Body, read); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// Each client starts inside the read-ahead window of the one
		// before. Were that one's handler not yet to have noticed its
		// client leave, this client would wait for, and so adopt, the
		// fill it planned, which then rightly runs to completion. Let each
		// leave fully first: what is measured is what hanging up costs.
		settled(fmt.Sprintf("client %d left", i))
	}
	got := e.Hub.Counters().BodyBytes
	t.Logf("%d clients reading %d KiB each cost %d bytes upstream (%.1f MB)", clients, read>>10, got, float64(got)/1e6)
	if got > size/4 {
		t.Errorf("upstream sent %d bytes for %d bytes read", got, clients*read)
	}
}
