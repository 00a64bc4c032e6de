package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// TestPullPrefetchesServerSide: with the server's admin API reachable,
// pull --server has the server fill its own cache, as the caller, and
// only shows the progress; no file byte comes to the client.
func TestPullPrefetchesServerSide(t *testing.T) {
	h, files, _ := pullFixture(t)
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/private", Private: true, ApprovedTokens: []string{"hf_good"},
		Files: []hubtest.File{{Path: "config.json", Data: []byte(`{}`)}}})
	dir := t.TempDir()
	built, err := app.Build(app.Config{Upstream: h.URL, CacheDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer built.Close()
	srv := httptest.NewServer(built.Main)
	defer srv.Close()
	adm := httptest.NewServer(built.Admin)
	defer adm.Close()
	t.Setenv("HF_TOKEN", "")

	var total int64
	for _, f := range files {
		total += int64(len(f.Data))
	}
	before := h.Counters().BodyBytes
	out, err := runCmd(t, "pull", "--server", srv.URL, "--admin", adm.URL, "--progress", "plain", "org/m")
	if err != nil {
		t.Fatalf("pull --server --admin: %v\n%s", err, out)
	}
	for _, want := range []string{"server-side (admin API at " + adm.URL + ")", "fetched model-00001-of-00002.safetensors (", "fetched tok/tokenizer.json (4.88 KiB)", "pulled 5 files"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "streaming") {
		t.Errorf("pull streamed although the admin API was there:\n%s", out)
	}
	if got := h.Counters().BodyBytes - before; got != total {
		t.Errorf("the server fetched %d body bytes upstream, want each file once (%d)", got, total)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, "models--org--m", "blobs", blobName(f))); err != nil {
			t.Errorf("%s not in the server's cache: %v", f.Path, err)
		}
	}
	out, err = runCmd(t, "pull", "--server", srv.URL, "--admin", adm.URL, "--progress", "plain", "--include", "*.json", "org/m")
	if err != nil || !strings.Contains(out, "hit tok/tokenizer.json (4.88 KiB)") || !strings.Contains(out, ": all already cached") {
		t.Errorf("second prefetch: %v\n%s", err, out)
	}

	// The caller's own access decides, as on the public routes.
	if _, err := runCmd(t, "pull", "--server", srv.URL, "--admin", adm.URL, "--progress", "none", "org/private"); err == nil ||
		!strings.Contains(err.Error(), "HTTP 401, RepoNotFound") {
		t.Errorf("a prefetch without a token of a private repo: %v, want the Hub's 401 RepoNotFound", err)
	}
	if out, err := runCmd(t, "pull", "--server", srv.URL, "--admin", adm.URL, "--progress", "none", "--token", "hf_good", "org/private"); err != nil ||
		!strings.Contains(out, "server-side") {
		t.Errorf("a prefetch with the repo's token: %v\n%s", err, out)
	}

	// No admin API there: pull streams, and says so.
	out, err = runCmd(t, "pull", "--server", srv.URL, "--admin", closedAddr(t), "--progress", "none", "org/m")
	if err != nil || !strings.Contains(out, "note: not prefetching server-side: no admin API at ") || !strings.Contains(out, "pulled 5 files") {
		t.Errorf("pull with an unreachable admin API: %v\n%s", err, out)
	}
}

func TestAdminTarget(t *testing.T) {
	t.Setenv("HUBPROXY_ADMIN_LISTEN", "")
	if addr, _ := adminTarget("", "http://127.0.0.1:8080"); addr != app.Defaults().AdminListen {
		t.Errorf("a local server: admin %q, want serve's default %q", addr, app.Defaults().AdminListen)
	}
	if addr, why := adminTarget("", "http://hubproxy.svc:8080"); addr != "" || !strings.Contains(why, "--admin") {
		t.Errorf("a remote server: admin %q (%s), want none and a hint", addr, why)
	}
	if addr, _ := adminTarget("127.0.0.1:9000", "http://hubproxy.svc:8080"); addr != "127.0.0.1:9000" {
		t.Errorf("--admin given: %q", addr)
	}
	t.Setenv("HUBPROXY_ADMIN_LISTEN", "unix:///tmp/a.sock")
	if addr, _ := adminTarget("", "http://127.0.0.1:8080"); addr != "unix:///tmp/a.sock" {
		t.Errorf("HUBPROXY_ADMIN_LISTEN, a local server: %q", addr)
	}
	// This machine's admin API says nothing of a remote server: using it
	// would fill another hubproxy's cache.
	if addr, why := adminTarget("", "http://hubproxy.svc:8080"); addr != "" || !strings.Contains(why, "--admin") {
		t.Errorf("HUBPROXY_ADMIN_LISTEN, a remote server: admin %q (%s), want none", addr, why)
	}
}
