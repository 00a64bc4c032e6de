package app_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/sharedfill"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// Security review: anyone who can write the shared store (here the RWX
// volume of a file:// store; the bucket's credentials for S3) planted
// EVIL… and its sha256, which is all a chunk object was, as a chunk of a
// cached file, and every node served it to range and tensor readers. A
// store writer without the cluster's secret can no longer make any node
// serve bytes that did not come from upstream: each node rejects the
// forgery, deletes it and fetches the chunk anew.
func TestClusterForgedChunkNeverServed(t *testing.T) {
	c := newCluster(t, "file", hubtest.Options{})
	a := hubtest.Tensor{Name: "a.weight", DType: "F32", Shape: []int64{1024, 1024}, Data: hubtest.RandomBytes(31, 4<<20)}
	b := hubtest.Tensor{Name: "b.weight", DType: "F32", Shape: []int64{512, 1024}, Data: hubtest.RandomBytes(32, 2<<20)}
	file := hubtest.Safetensors([]hubtest.Tensor{a, b}, nil)
	c.hub.AddRepo(hubtest.RepoSpec{ID: "org/forged", Files: []hubtest.File{{Path: "model.safetensors", Data: file}}})
	path := "/org/forged/resolve/main/model.safetensors"
	readAll(t, []*node{c.node(nil)}, 1, path, file)

	root := strings.TrimPrefix(c.store, "file://")
	chunkFile := func(i int64) string {
		return filepath.Join(root, filepath.FromSlash(sharedfill.ChunkKey(sum(file), clusterChunk, i)))
	}
	chunks := int64(len(file)+clusterChunk-1) / clusterChunk
	testutil.Eventually(t, time.Minute, "every chunk of the file in the store", func() bool {
		for i := range chunks {
			if _, err := os.Stat(chunkFile(i)); err != nil {
				return false
			}
		}
		return true
	})
	genuine, err := os.ReadFile(chunkFile(4))
	if err != nil {
		t.Fatal(err)
	}
	// What an attacker writes: the bytes they want served and the digest
	// a node once checked, as the old layout had it (chunk 3), and the
	// same padded to a sealed object's size, naming the cluster's secret
	// id, which any object shows (chunk 4).
	evil := bytes.Repeat([]byte("EVIL"), clusterChunk/4)
	evilSum := sha256.Sum256(evil)
	forge := func() {
		t.Helper()
		asOld := append(bytes.Clone(evil), evilSum[:]...)
		sealedSize := append(append(bytes.Clone(evil), genuine[clusterChunk:clusterChunk+8]...), evilSum[:]...)
		for idx, obj := range map[int64][]byte{3: asOld, 4: sealedSize} {
			if err := os.WriteFile(chunkFile(idx), obj, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	for i := range 2 {
		forge()
		n := c.node(nil)
		from := 3*clusterChunk + 1234
		status, body, err := n.get(t, path, "Range", fmt.Sprintf("bytes=%d-%d", from, from+4095))
		if err != nil || status != http.StatusPartialContent || !bytes.Equal(body, file[from:from+4096]) {
			t.Fatalf("node %d, a range over the forged chunk: %d %v, upstream's bytes %v (EVIL: %v)",
				i, status, err, bytes.Equal(body, file[from:from+4096]), bytes.Contains(body, []byte("EVIL")))
		}
		status, body, err = n.get(t, "/models/org/forged/tensors/a.weight")
		if err != nil || status != http.StatusOK || !bytes.Equal(body, a.Data) {
			t.Fatalf("node %d, a tensor over the forged chunks: %d %v, upstream's bytes %v (EVIL: %v)",
				i, status, err, bytes.Equal(body, a.Data), bytes.Contains(body, []byte("EVIL")))
		}
		for reason, want := range map[string]float64{"size": 1, "mac": 1} {
			if got := n.metric(t, "hubproxy_store_chunks_rejected_total", fmt.Sprintf("reason=%q", reason)); got != want {
				t.Errorf("node %d: %v chunks rejected for %s, want %v", i, got, reason, want)
			}
		}
		if got := n.metric(t, "hubproxy_cache_verify_failures_total", ""); got != 0 {
			t.Errorf("node %d: verify failures %v: forged bytes reached the cache", i, got)
		}
	}
}

// Without a secret a store is refused at start, with the way to make one;
// a secret too short is refused too.
func TestClusterStoreNeedsSecret(t *testing.T) {
	c := newCluster(t, "file", hubtest.Options{})
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("too-short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ file, inline, want string }{
		"none":  {want: "head -c 32 /dev/urandom | base64"},
		"short": {file: short, want: "at least 32"},
		"both":  {file: c.secretFile, inline: clusterSecret, want: "both set"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := c.config(t.TempDir())
			cfg.SharedStoreSecretFile, cfg.SharedStoreSecret = tc.file, tc.inline
			h, err := app.Build(cfg, nil)
			if err == nil {
				h.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), clusterSecret) {
				t.Fatalf("error %q, want it to say %q (and never the secret)", err, tc.want)
			}
		})
	}
}
