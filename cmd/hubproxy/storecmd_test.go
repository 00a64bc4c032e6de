package main

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// TestCacheStoreCommands fills a file:// store through a real server, then
// lists, measures and prunes it with `hubproxy cache store`.
func TestCacheStoreCommands(t *testing.T) {
	h := hubtest.NewT(t, hubtest.Options{})
	data := hubtest.RandomBytes(9, 3<<20+5)
	sum := sha256.Sum256(data)
	etag := hex.EncodeToString(sum[:])
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/st", Files: []hubtest.File{{Path: "w.bin", Data: data}}})
	store := "file://" + t.TempDir()
	cacheDir := t.TempDir()
	built, err := app.Build(app.Config{Upstream: h.URL, CacheDir: cacheDir, SharedStore: store, ChunkSize: 1 << 20,
		SharedStoreSecret: "storecmd-test-secret-0123456789abcdef"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(built.Main)
	got, err := httpGet(srv.URL + "/org/st/resolve/main/w.bin")
	srv.Close()
	built.Close() // waits for the chunks' puts
	if err != nil || string(got) != string(data) {
		t.Fatalf("GET: %v", err)
	}

	// An object of an older layout, as a node of an older version left it.
	storeDir := strings.TrimPrefix(store, "file://")
	writeTestFile(t, filepath.Join(storeDir, "v2", "chunks", etag, "1048576", "0"), make([]byte, 1000))

	// None of the commands is given the cluster's secret: none needs it.
	out, err := runCmd(t, "cache", "store", "ls", "--shared-store", store)
	if err != nil || !regexp.MustCompile(etag+`\s+4\s+3\.00 MiB`).MatchString(out) {
		t.Fatalf("store ls: %v\n%s", err, out)
	}
	out, err = runCmd(t, "cache", "store", "du", "--shared-store", store, "--bytes")
	// The objects' bytes: the file's, and each chunk's 40-byte seal.
	if err != nil || !strings.Contains(out, "3145893 in 4 chunks of 1 file") || !strings.Contains(out, "0 claims") ||
		!strings.Contains(out, "1000 in 1 object of older layouts") {
		t.Fatalf("store du: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "cache", "store", "prune", "--shared-store", store); err == nil {
		t.Error("prune with no limit ran")
	}
	out, err = runCmd(t, "cache", "store", "prune", "--shared-store", store, "--max-bytes", "1MiB", "--dry-run")
	if err != nil || !strings.Contains(out, "would remove "+etag) {
		t.Fatalf("prune --dry-run: %v\n%s", err, out)
	}
	// Pinned through this node's cache, the file's chunks stay.
	if out, err := runCmd(t, "cache", "pin", "org/st", "--cache-dir", cacheDir); err != nil {
		t.Fatalf("pin: %v\n%s", err, out)
	}
	out, err = runCmd(t, "cache", "store", "prune", "--shared-store", store, "--cache-dir", cacheDir, "--older-than", "0s")
	if err != nil || !strings.Contains(out, "keeping 1 file of pinned repos") || !strings.Contains(out, "removed 0 files") ||
		!strings.Contains(out, "removed 1 object (1000 B) of older layouts") {
		t.Fatalf("prune of a pinned file: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "cache", "store", "prune", "--shared-store", store, "--cache-dir", t.TempDir(), "--older-than", "0s", "--config", pinsConfig(t)); err == nil {
		t.Fatalf("prune with pins this node cannot resolve ran:\n%s", out)
	}
	if _, err := runCmd(t, "cache", "unpin", "org/st", "--cache-dir", cacheDir); err != nil {
		t.Fatal(err)
	}
	out, err = runCmd(t, "cache", "store", "prune", "--shared-store", store, "--older-than", "0s", "--max-bytes", "1MiB")
	if err != nil || !strings.Contains(out, "removed 1 file") {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	out, _ = runCmd(t, "cache", "store", "du", "--shared-store", store, "--bytes")
	if !strings.Contains(out, "0 in 0 chunks of 0 files") {
		t.Fatalf("after prune: %s", out)
	}
	if _, err := runCmd(t, "cache", "store", "ls"); err == nil || !strings.Contains(err.Error(), "no shared store") {
		t.Errorf("ls without a store: %v", err)
	}
	if _, err := runCmd(t, "cache", "store", "ls", "--shared-store", "gs://x"); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("ls of a gs:// store: %v", err)
	}
}

func writeTestFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// pinsConfig writes a config file that pins org/st.
func pinsConfig(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "hubproxy.yaml")
	if err := os.WriteFile(p, []byte("pins: [org/st]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
