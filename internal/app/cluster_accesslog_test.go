package app_test

import (
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// loggedNode is c.node with its JSON log kept.
func (c *cluster) loggedNode(tweak func(*app.Config)) (*node, *syncBuffer) {
	c.t.Helper()
	n, logs := &node{dir: c.t.TempDir()}, &syncBuffer{}
	cfg := c.config(n.dir)
	if tweak != nil {
		tweak(&cfg)
	}
	h, err := app.Build(cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		c.t.Fatal(err)
	}
	srv := httptest.NewServer(h.Main)
	n.url, n.h = srv.URL, h
	c.t.Cleanup(func() { srv.Close(); h.Close() })
	return n, logs
}

// requestLine waits for the access log's line for path (the handler logs
// after its last byte went out) and returns it.
func requestLine(t *testing.T, logs *syncBuffer, path string) map[string]any {
	t.Helper()
	var line map[string]any
	testutil.Eventually(t, 10*time.Second, "the request line of "+path, func() bool {
		for _, l := range requestLines(logs) {
			if l["path"] == path {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

// byteCounts are a request line's upstream_bytes and store_bytes; a field
// missing is a failure.
func byteCounts(t *testing.T, line map[string]any) (up, store int64) {
	t.Helper()
	u, ok1 := line["upstream_bytes"].(float64)
	s, ok2 := line["store_bytes"].(float64)
	if !ok1 || !ok2 {
		t.Fatalf("request line without upstream_bytes and store_bytes: %v", line)
	}
	return int64(u), int64(s)
}

// Review of the shared tier (issue 21): the access log counted bytes the
// shared store served as upstream_bytes, so a node reading a file the
// cluster already had logged it as fetched from the hub. The node that
// fetched the file logs it as upstream bytes; the next node, which read it
// from the store, as store bytes, with 0 from upstream (and the hub agrees).
func TestClusterAccessLogTellsStoreFromUpstream(t *testing.T) {
	c := newCluster(t, "file", hubtest.Options{})
	const size = 5<<20 + 777 // the last chunk short
	data := c.addModel("org/logged", size, nil)
	path := "/org/logged/resolve/main/model.safetensors"

	// Chunks of one block, so that every fill (whole blocks) covers whole
	// chunks: a fill that starts inside a chunk whose flight already
	// ended reads that chunk's rest from the store, even on the node that
	// fetched it, and is logged so, truly (issue 21's item 3 aligns fills).
	block := func(cfg *app.Config) { cfg.ChunkSize = 64 << 10 }
	first, firstLogs := c.loggedNode(block)
	c.hub.ResetCounters()
	readAll(t, []*node{first}, 1, path, data)
	if cdn := c.hub.Counters().BodyBytes; cdn != size {
		t.Fatalf("the first node read %d bytes from the hub, want the file's %d", cdn, size)
	}
	up, store := byteCounts(t, requestLine(t, firstLogs, path))
	if up != size || store != 0 {
		t.Errorf("the node that fetched the file logged upstream_bytes %d store_bytes %d; want %d and 0", up, store, size)
	}

	second, secondLogs := c.loggedNode(block)
	c.hub.ResetCounters()
	readAll(t, []*node{second}, 1, path, data)
	if cdn := c.hub.Counters().BodyBytes; cdn != 0 {
		t.Fatalf("the second node read %d bytes from the hub, want 0: the store holds the file", cdn)
	}
	up, store = byteCounts(t, requestLine(t, secondLogs, path))
	if up != 0 || store != size {
		t.Errorf("the node that read the file from the store logged upstream_bytes %d store_bytes %d; want 0 and %d", up, store, size)
	}
}
