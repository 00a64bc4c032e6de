package app_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// Issue 21: 64 sequential 64 KiB reads inside one chunk read that chunk
// from the store 64 times (128× the bytes served). A node keeps the chunks
// it checked: sequential small ranges of one chunk cost one GET.
func TestClusterSmallRangesOneGetPerChunk(t *testing.T) {
	c := newCluster(t, "file", hubtest.Options{})
	const size = 4 << 20
	data := c.addModel("org/small-ranges", size, nil)
	readAll(t, []*node{c.node(nil)}, 1, "/org/small-ranges/resolve/main/model.safetensors", data) // the store holds it

	fresh := c.node(nil)
	const piece = 64 << 10
	for off := int64(2 * clusterChunk); off < 3*clusterChunk; off += piece {
		status, body, err := fresh.get(t, "/org/small-ranges/resolve/main/model.safetensors",
			"Range", fmt.Sprintf("bytes=%d-%d", off, off+piece-1))
		if err != nil || status != http.StatusPartialContent || string(body) != string(data[off:off+piece]) {
			t.Fatalf("range at %d: status %d, err %v, bytes ok %v", off, status, err, string(body) == string(data[off:off+piece]))
		}
	}
	gets := fresh.metric(t, "hubproxy_store_requests_total", `op="get"`)
	read := fresh.metric(t, "hubproxy_store_bytes_total", `direction="read"`)
	hits := fresh.metric(t, "hubproxy_store_chunk_lookups_total", `result="hit"`)
	t.Logf("%d ranges of %d bytes in one chunk: %v store GETs, %v bytes read, %v served from memory", clusterChunk/piece, piece, gets, read, hits)
	if gets != 1 {
		t.Errorf("%v store GETs for %d ranges inside one chunk, want 1", gets, clusterChunk/piece)
	}
	if read > clusterChunk+64 {
		t.Errorf("read %v bytes from the store to serve one chunk's %d", read, clusterChunk)
	}
}
