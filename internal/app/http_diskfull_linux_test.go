package app_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// smallFS mounts a tmpfs of the given size for the test. It needs root (as
// the CI run has); without it the test fails rather than pretend.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mounting a %s tmpfs for the disk-full test (needs root): %v", size, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

func TestFullDiskStillServesAndDamagesNothing(t *testing.T) {
	dir := smallFS(t, "8m")
	e := newEnv(t, hubtest.Options{}, func(c *app.Config) {
		c.CacheDir = dir
		c.MinFreeBytes = 0 // let the disk really fill up
	})
	small := hubtest.RandomBytes(21, 3<<20)
	big := hubtest.RandomBytes(22, 20<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{
		{Path: "small.safetensors", Data: small}, {Path: "big.safetensors", Data: big},
	}})
	if _, body := e.Do(http.MethodGet, "/org/model/resolve/main/small.safetensors"); sha(body) != sha(small) {
		t.Fatal("small file")
	}
	// 20 MiB cannot fit in 8 MiB: the download must still complete, correct.
	resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/big.safetensors")
	if resp.StatusCode != 200 || sha(body) != sha(big) {
		t.Fatalf("big file on a full disk: %d, %d bytes, sha match %v", resp.StatusCode, len(body), sha(body) == sha(big))
	}
	// And a range of it.
	resp, body = e.Do(http.MethodGet, "/org/model/resolve/main/big.safetensors", "Range", "bytes=15000000-15999999")
	if resp.StatusCode != 206 || sha(body) != sha(big[15000000:16000000]) {
		t.Fatalf("range on a full disk: %d", resp.StatusCode)
	}
	// What was cached before is intact and still served from the cache.
	e.Hub.ResetCounters()
	if _, body := e.Do(http.MethodGet, "/org/model/resolve/main/small.safetensors"); sha(body) != sha(small) {
		t.Fatal("small file damaged by the full disk")
	}
	if n := e.Hub.Counters().BodyBytes; n != 0 {
		t.Errorf("cached small file refetched (%d bytes)", n)
	}
	b, err := os.ReadFile(filepath.Join(dir, "models--org--model", "blobs", sha(small)))
	if err != nil || sha(b) != sha(small) {
		t.Fatalf("small blob on disk: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "models--org--model", "blobs", sha(big))); err == nil {
		t.Error("a blob was promoted that cannot have been stored whole")
	}
	_, m := e.Do(http.MethodGet, "/metrics")
	if !strings.Contains(string(m), "hubproxy_cache_bypass_total") || strings.Contains(string(m), "hubproxy_cache_bypass_total 0") {
		t.Errorf("bypass not counted")
	}
}

// On a full disk a whole download is still verified: the bytes that could
// not be cached are hashed as they stream, with the cached start, and a body
// that does not hash to its ETag never completes as a 200.
func TestFullDiskDownloadIsStillVerified(t *testing.T) {
	dir := smallFS(t, "8m")
	e := newEnv(t, hubtest.Options{}, func(c *app.Config) {
		c.CacheDir = dir
		c.MinFreeBytes = 0
	})
	big := hubtest.RandomBytes(23, 20<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "big.safetensors", Data: big}}})
	e.Hub.SetFaults(hubtest.Faults{CorruptBytes: hubtest.Fault{N: 1 << 30}, CorruptPath: "big.safetensors"})
	req, _ := http.NewRequest(http.MethodGet, e.Proxy.URL+"/org/model/resolve/main/big.safetensors", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return // refused outright: fine
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode == 200 && len(body) == len(big) {
		t.Fatalf("a corrupt 20 MiB body completed as a 200 (sha match %v)", sha(body) == sha(big))
	}
	if _, m := e.Do(http.MethodGet, "/metrics"); strings.Contains(string(m), "hubproxy_cache_bypass_total 0") {
		t.Error("the test did not exercise the bypass")
	}
	// Without the fault, the same download completes, correct.
	e.Hub.SetFaults(hubtest.Faults{})
	if resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/big.safetensors"); resp.StatusCode != 200 || sha(body) != sha(big) {
		t.Fatalf("after the fault: %d, sha match %v", resp.StatusCode, sha(body) == sha(big))
	}
}
