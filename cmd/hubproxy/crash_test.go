package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// TestKillDuringFillThenRestart kills the real binary with SIGKILL while it is
// filling a file, several times, and checks that each restart resumes from a
// cache that never claims bytes it does not hold, ending with a verified blob.
func TestKillDuringFillThenRestart(t *testing.T) {
	bin := buildBinary(t)

	// The bandwidth cap keeps each fill running long enough to be killed.
	h := hubtest.NewT(t, hubtest.Options{BandwidthPerConn: 8 << 20})
	data := hubtest.RandomBytes(42, 24<<20)
	sum := sha256.Sum256(data)
	etag := hex.EncodeToString(sum[:])
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/crash", Files: []hubtest.File{{Path: "w.safetensors", Data: data}}})
	dir := t.TempDir()
	blob := filepath.Join(dir, "models--org--crash", "blobs", etag)

	sidecar := filepath.Join(dir, ".hubproxy", "partial", "models--org--crash--"+etag+".json")
	serveArgs := []string{"--upstream", h.URL, "--cache-dir", dir, "--chunk-size", "1MiB", "--cache-min-free-bytes", "0"}
	for round := range 3 {
		p := startServe(t, bin, nil, serveArgs...)
		resp, err := http.Get("http://" + p.addr + "/org/crash/resolve/main/w.safetensors")
		if err != nil {
			t.Fatal(err)
		}
		// Read a little, then kill the process mid-fill: at once in the
		// first round, and in later rounds once some progress is durable,
		// so that the restart has something to resume.
		if _, err := io.CopyN(io.Discard, resp.Body, int64(2+round)<<20); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if round > 0 {
			testutil.Eventually(t, 30*time.Second, "the partial's sidecar", func() bool {
				fi, err := os.Stat(sidecar)
				return err == nil && fi.Size() > 0
			})
		}
		p.Kill()
		resp.Body.Close()
		if _, err := os.Stat(blob); err == nil {
			// Possible only if the whole file had been fetched and
			// verified before the kill; then it must be correct.
			checkFile(t, blob, etag)
		}
	}

	before := h.Counters().BodyBytes
	p := startServe(t, bin, nil, serveArgs...)
	defer p.Kill()
	resp, err := http.Get("http://" + p.addr + "/org/crash/resolve/main/w.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || sha256.Sum256(got) != sum {
		t.Fatalf("after restarts: %v, sha match %v", err, sha256.Sum256(got) == sum)
	}
	checkFile(t, blob, etag)
	finish := h.Counters().BodyBytes - before
	t.Logf("upstream bytes: %d over 3 killed fills, %d to finish (file %d)", before, finish, len(data))
	if finish >= int64(len(data)) {
		t.Errorf("the restart refetched the whole file (%d bytes): the partial did not resume", finish)
	}
}

func checkFile(t *testing.T, path, etag string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	if got := hex.EncodeToString(s[:]); got != etag {
		t.Fatalf("%s holds wrong bytes (sha256 %s)", path, got)
	}
}
