package app_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/hubproxy/hubproxy/internal/apptest"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// TestFileGETSaysWhetherItWasCached: X-Hubproxy-Cache tells what the cache
// held when the answer began (hubproxy pull reports it per file): none of
// the file, some of it, or all of it.
func TestFileGETSaysWhetherItWasCached(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/model", Files: []hubtest.File{
		{Path: "model.safetensors", Data: hubtest.RandomBytes(1, 4*apptest.BlockSize)},
	}})
	get := func(hdr ...string) string {
		t.Helper()
		resp, _ := e.Do(http.MethodGet, "/org/model/resolve/main/model.safetensors", hdr...)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("GET: %d", resp.StatusCode)
		}
		return resp.Header.Get("X-Hubproxy-Cache")
	}
	// The last byte: read-ahead has nothing after it to fill.
	if got := get("Range", fmt.Sprintf("bytes=%d-", 4*apptest.BlockSize-1)); got != "miss" {
		t.Errorf("cold: X-Hubproxy-Cache %q, want miss", got)
	}
	if got := get(); got != "partial" {
		t.Errorf("after a range: X-Hubproxy-Cache %q, want partial", got)
	}
	if got := get(); got != "hit" {
		t.Errorf("after a whole read: X-Hubproxy-Cache %q, want hit", got)
	}
	if resp, _ := e.Do(http.MethodHead, "/org/model/resolve/main/model.safetensors"); resp.Header.Get("X-Hubproxy-Cache") != "" {
		t.Errorf("HEAD answers X-Hubproxy-Cache %q: it opens nothing, so it cannot know", resp.Header.Get("X-Hubproxy-Cache"))
	}
}
