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
		mu   sync.Mutex
		lost = map[string]int64{}
	)
	r, err := newRelay("test", srv.Listener.Addr().String(), func(line string, n int64) {
		mu.Lock()
		lost[line] += n
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
	waitUntil(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return lost["GET /slow HTTP/1.1"] > 1000
	})
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

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
	}
}
