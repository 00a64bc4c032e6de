package dirhub_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/dirhub"
	"github.com/hubproxy/hubproxy/internal/inproc"
)

// TestHubproxyOverDirhub wires dirhub under hubproxy exactly as the
// `--upstream dir:PATH` wiring does (Transport, Upstream http://dirhub.local)
// and checks that files are served, ranged and land verified in the cache.
func TestHubproxyOverDirhub(t *testing.T) {
	dir := t.TempDir()
	weights := make([]byte, 3<<20+123)
	rand.NewChaCha8([32]byte{1}).Read(weights)
	for name, data := range map[string][]byte{
		"org/m/config.json":       []byte(`{"model_type":"llama"}`),
		"org/m/model.safetensors": weights,
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dh, err := dirhub.New(dir, dirhub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dh.Close()
	cacheDir := t.TempDir()
	built, err := app.Build(app.Config{
		Upstream:  dirhub.URL,
		Transport: inproc.Transport(dh),
		CacheDir:  cacheDir,
		ChunkSize: 1 << 20,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer built.Close()
	srv := httptest.NewServer(built.Main)
	defer srv.Close()

	sum := sha256.Sum256(weights)
	etag := hex.EncodeToString(sum[:])
	resp, err := http.Head(srv.URL + "/org/m/resolve/main/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("X-Linked-Etag") != strconv.Quote(etag) || resp.ContentLength != int64(len(weights)) {
		t.Fatalf("HEAD through hubproxy: %d %v", resp.StatusCode, resp.Header)
	}

	req, _ := http.NewRequest("GET", srv.URL+"/org/m/resolve/main/model.safetensors", nil)
	req.Header.Set("Range", "bytes=2000000-2000009")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 206 || string(got) != string(weights[2000000:2000010]) {
		t.Errorf("range through hubproxy: %d %x", resp.StatusCode, got)
	}

	resp, err = http.Get(srv.URL + "/org/m/resolve/main/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || sha256.Sum256(got) != sum {
		t.Fatalf("full GET: %v, %d bytes", err, len(got))
	}
	if _, err := os.Stat(filepath.Join(cacheDir, "models--org--m", "blobs", etag)); err != nil {
		t.Errorf("blob not in the cache after a full read: %v", err)
	}

	resp, err = http.Get(srv.URL + "/org/m/resolve/main/absent.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || resp.Header.Get("X-Error-Code") != "EntryNotFound" {
		t.Errorf("missing file through hubproxy: %d %q", resp.StatusCode, resp.Header.Get("X-Error-Code"))
	}

	// The filled cache is itself an HF_HUB_CACHE: a second hubproxy can use
	// it as its upstream (an air-gapped copy), with the blob names as ETags.
	built.Close()
	dh2, err := dirhub.New(cacheDir, dirhub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dh2.Close()
	built2, err := app.Build(app.Config{Upstream: dirhub.URL, Transport: inproc.Transport(dh2), CacheDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer built2.Close()
	srv2 := httptest.NewServer(built2.Main)
	defer srv2.Close()
	resp, err = http.Get(srv2.URL + "/org/m/resolve/main/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || sha256.Sum256(got) != sum || resp.Header.Get("X-Linked-Etag") != strconv.Quote(etag) {
		t.Errorf("through a hubproxy over the first one's cache: %v, %d bytes, %v", err, len(got), resp.Header)
	}
}
