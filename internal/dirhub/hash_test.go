package dirhub

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// TestHashOutlivesTheRequest checks that a hash started for a request that
// gave up keeps running, once, and serves the next request from memory.
func TestHashOutlivesTheRequest(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"org/m/w.safetensors": "weights"})
	h, err := New(dir, Options{HashWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.hashes.sem <- struct{}{} // the only worker is busy: hashing cannot start

	s, herr := h.open(hub.MustRepo(hub.Model, "org/m"), "main")
	if herr != nil {
		t.Fatal(herr)
	}
	f, _ := s.file("w.safetensors")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.meta(ctx, f); !errors.Is(err, context.Canceled) {
		t.Fatalf("meta with a cancelled request: %v", err)
	}
	// The abandoned hash still runs (a second caller joins it, below).
	second := h.hashes.start(hashKey{rel: f.rel, size: f.size, mtime: f.mtime.UnixNano(), kind: hub.HashSHA256})
	<-h.hashes.sem // free the worker
	m, err := h.meta(context.Background(), f)
	if err != nil || m.etag != sha256Hex("weights") || !m.lfs {
		t.Fatalf("meta = %+v, %v", m, err)
	}
	if sum, err := second.wait(context.Background()); err != nil || sum != m.etag {
		t.Errorf("a concurrent caller got %q, %v", sum, err)
	}
	if h.hashes.done.Len() != 1 {
		t.Errorf("hash cache holds %d entries", h.hashes.done.Len())
	}
}

// TestCloseStopsHashing checks that Close cancels queued hashes and waits.
func TestCloseStopsHashing(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.bin": "x"})
	h, err := New(dir, Options{HashWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	h.hashes.sem <- struct{}{}
	c := h.hashes.start(hashKey{rel: "a.bin", size: 1, mtime: time.Now().UnixNano(), kind: hub.HashSHA256})
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Errorf("queued hash after Close: %v", err)
	}
	if _, err := h.hashes.start(hashKey{rel: "a.bin"}).wait(context.Background()); err == nil {
		t.Error("a hash started after Close")
	}
}
