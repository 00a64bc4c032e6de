package app_test

import (
	"testing"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// A node whose disk cannot hold the file reads around its cache through the
// shared origin (repofs File.around), and logs what it read there the same
// way: the store's bytes as store_bytes, none from upstream.
func TestClusterAccessLogAroundTheCache(t *testing.T) {
	c := newCluster(t, "file", hubtest.Options{})
	const size = 20<<20 + 4321
	data := c.addModel("org/big", size, nil)
	path := "/org/big/resolve/main/model.safetensors"
	readAll(t, []*node{c.node(nil)}, 1, path, data) // the store holds it whole now

	small, logs := c.loggedNode(func(cfg *app.Config) {
		cfg.CacheDir = smallFS(t, "8m") // the file cannot fit
		cfg.MinFreeBytes = 0
	})
	c.hub.ResetCounters()
	readAll(t, []*node{small}, 1, path, data)
	if cdn := c.hub.Counters().BodyBytes; cdn != 0 {
		t.Fatalf("the node with a small disk read %d bytes from the hub, want 0", cdn)
	}
	line := requestLine(t, logs, path)
	up, store := byteCounts(t, line)
	t.Logf("small disk: cache %v upstream_bytes %d store_bytes %d, file %d", line["cache"], up, store, size)
	if up != 0 || store < size {
		t.Errorf("reading around the cache logged upstream_bytes %d store_bytes %d (cache %v); want 0 and at least the file's %d", up, store, line["cache"], size)
	}
}
