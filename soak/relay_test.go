package soak

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/testutil"
)

func TestRelayForwardsRefusesAndCounts(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			w.Write([]byte(strings.Repeat("x", 1000)))
			w.(http.Flusher).Flush()
			<-block
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	defer close(block)
	var (
		mu       sync.Mutex
		lost     = map[string]int64{}
		complete = map[string]bool{}
		ranges   = map[string]string{}
	)
	r, err := newRelay("test", srv.Listener.Addr().String(), func(line, rng string, n int64, whole bool) {
		mu.Lock()
		lost[line] += n
		complete[line], ranges[line] = whole, rng
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	c := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	resp, err := c.Get(r.URL() + "/hi")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello" {
		t.Fatalf("relayed %q", b)
	}
	// A connection that ends after a whole answer lost nothing in flight,
	// and says so.
	req, _ := http.NewRequest("GET", r.URL()+"/ranged", nil)
	req.Header.Set("Range", "bytes=3-4")
	if resp, err := c.Do(req); err != nil {
		t.Fatal(err)
	} else {
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	c.CloseIdleConnections()
	testutil.Eventually(t, 5*time.Second, "the relay to report the ranged answer's end", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return lost["GET /ranged HTTP/1.1"] > 0
	})
	mu.Lock()
	if !complete["GET /ranged HTTP/1.1"] || ranges["GET /ranged HTTP/1.1"] != "bytes=3-4" {
		t.Errorf("a whole answer's end: complete %v, Range %q", complete["GET /ranged HTTP/1.1"], ranges["GET /ranged HTTP/1.1"])
	}
	mu.Unlock()

	// A partition cuts an answer in flight, and the relay says which.
	resp, err = c.Get(r.URL() + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	r.set(relayRefuse)
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("an answer survived the partition")
	}
	resp.Body.Close()
	testutil.Eventually(t, 5*time.Second, "the relay to report the answer the partition cut", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return lost["GET /slow HTTP/1.1"] > 1000
	})
	if mu.Lock(); complete["GET /slow HTTP/1.1"] {
		t.Error("an answer cut in flight counted as whole")
	}
	mu.Unlock()
	if _, err := c.Get(r.URL() + "/hi"); err == nil {
		t.Error("a refusing relay answered")
	}

	r.set(relayBlackhole)
	conn, err := net.Dial("tcp", r.Host())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(200 * time.Millisecond))
	io.WriteString(conn, "GET /hi HTTP/1.1\r\nHost: x\r\n\r\n")
	if n, err := conn.Read(buf); n != 0 || err == nil {
		t.Errorf("a blackhole answered: %d %v", n, err)
	}
	r.set(relayUp)
	c.CloseIdleConnections()
	if resp, err := c.Get(r.URL() + "/hi"); err != nil {
		t.Errorf("after the outage: %v", err)
	} else {
		resp.Body.Close()
	}
}

// A POST to a bait path is answered 500 by the relay itself, never
// reaching the hub; other requests pass as before.
func TestRelayAnswersBait(t *testing.T) {
	var seen sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.Path, true)
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	r, err := newRelay("test", srv.Listener.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	c := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	for i := range 3 {
		resp, err := c.Post(r.URL()+"/api/models/a/b"+baitMarker, "application/json", strings.NewReader(`{"n":1}`))
		if err != nil {
			t.Fatalf("bait %d: %v", i, err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 500 {
			t.Errorf("bait %d: %d", i, resp.StatusCode)
		}
		resp, err = c.Get(r.URL() + "/hi")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "hello" {
			t.Errorf("after a bait: %q", b)
		}
	}
	// Counted once the relay's side is done.
	testutil.Eventually(t, 5*time.Second, "three baits counted", func() bool { return r.baited.Load() == 3 })
	if _, ok := seen.Load("/api/models/a/b" + baitMarker); ok {
		t.Error("the bait reached the hub")
	}
}
