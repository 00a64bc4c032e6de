package app_test

import (
	"net/http"
	"testing"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// Review (shared tier under real cluster conditions): a node whose disk
// was full read around its cache straight from the hub, ignoring the store
// that held the file whole: a node with a 64 MiB cache read a 456 MiB file
// from the hub, twice. Reads that bypass the cache go through the shared
// origin: the store first, claims for what is missing.
func TestClusterSmallDiskReadsTheStore(t *testing.T) {
	c := newCluster(t, "file", hubtest.Options{})
	const size = 20<<20 + 4321
	data := c.addModel("org/big", size, nil)
	path := "/org/big/resolve/main/model.safetensors"
	readAll(t, []*node{c.node(nil)}, 1, path, data) // the store holds it whole now

	small := c.node(func(cfg *app.Config) {
		cfg.CacheDir = smallFS(t, "8m") // the file cannot fit
		cfg.MinFreeBytes = 0
	})
	c.hub.ResetCounters()
	readAll(t, []*node{small}, 1, path, data)
	status, body, err := small.get(t, path, "Range", "bytes=15000000-15999999")
	if err != nil || status != http.StatusPartialContent || sum(body) != sum(data[15000000:16000000]) {
		t.Fatalf("a range on the small disk: %d, %v", status, err)
	}
	if cdn := c.hub.Counters(); cdn.BodyBytes != 0 {
		t.Errorf("the node with a small disk read %d bytes (%.2f× the file) from the hub; want 0, the store holds it", cdn.BodyBytes, float64(cdn.BodyBytes)/size)
	}
}
