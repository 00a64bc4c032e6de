package main

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/bytesize"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// runCmd runs the CLI with pull, cache, version and demo present whether or
// not root.go wires them yet.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	for _, c := range []*cobra.Command{newPullCmd(), newCacheCmd(), newVersionCmd(), newDemoCmd()} {
		if found, _, err := root.Find([]string{c.Name()}); err != nil || found == root {
			root.AddCommand(c)
		}
	}
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// blobName is the cache file name of f on the fake hub: its sha256 if the
// hub stores it in LFS (weights, or ≥ 1 MiB), else its git blob sha1.
func blobName(f hubtest.File) string {
	if strings.HasSuffix(f.Path, ".safetensors") || len(f.Data) >= 1<<20 {
		s := sha256.Sum256(f.Data)
		return hex.EncodeToString(s[:])
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(f.Data))
	h.Write(f.Data)
	return hex.EncodeToString(h.Sum(nil))
}

func pullFixture(t *testing.T) (*hubtest.Hub, []hubtest.File, string) {
	t.Helper()
	h := hubtest.NewT(t, hubtest.Options{})
	files := append(hubtest.ShardedModel("model", 2, 3, 64, 64),
		hubtest.File{Path: "config.json", Data: []byte(`{"model_type":"llama"}`)},
		hubtest.File{Path: "tok/tokenizer.json", Data: hubtest.RandomBytes(3, 5000)})
	commit := h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/m", Files: files})
	return h, files, commit
}

func TestPullInProcessShowsProgressAndFillsCache(t *testing.T) {
	h, files, commit := pullFixture(t)
	dir := t.TempDir()
	out, err := runCmd(t, "pull", "--upstream", h.URL, "--cache-dir", dir, "--progress", "plain", "--jobs", "2", "org/m")
	if err != nil {
		t.Fatalf("pull: %v\n%s", err, out)
	}
	var total int
	for _, f := range files {
		total += len(f.Data)
	}
	for _, want := range []string{
		"pulling org/m@main (" + commit[:12] + "): 5 files",
		"fetched model-00002-of-00002.safetensors (",
		"fetched tok/tokenizer.json (4.88 KiB)",
		fmt.Sprintf("progress: %[1]s of %[1]s (100%%)", bytesize.Human(int64(total))),
		"pulled 5 files",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\r") {
		t.Errorf("plain output redraws a line:\n%q", out)
	}
	for _, f := range files {
		blob := filepath.Join(dir, "models--org--m", "blobs", blobName(f))
		if info, err := os.Stat(blob); err != nil || info.Size() != int64(len(f.Data)) {
			t.Errorf("%s: blob %v", f.Path, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "models--org--m", "snapshots", commit, f.Path)); err != nil {
			t.Errorf("%s: snapshot link %v", f.Path, err)
		}
	}

	// --include matches whole paths, "*" crossing "/"; a second pull is
	// served from the cache without fetching any file body again, and
	// says so file by file.
	before := h.Counters().BodyBytes
	out, err = runCmd(t, "pull", "--upstream", h.URL, "--cache-dir", dir, "--progress", "plain", "--include", "*.json", "org/m")
	if err != nil || !strings.Contains(out, ": 3 files") || strings.Contains(out, "fetched") ||
		!strings.Contains(out, "hit tok/tokenizer.json (4.88 KiB)") || !strings.Contains(out, ": all already cached") {
		t.Errorf("pull --include '*.json': %v\n%s", err, out)
	}
	if got := h.Counters().BodyBytes - before; got != 0 {
		t.Errorf("a pull of cached files fetched %d body bytes upstream", got)
	}
	if _, err := runCmd(t, "pull", "--upstream", h.URL, "--cache-dir", dir, "--include", "*.gguf", "org/m"); err == nil || !strings.Contains(err.Error(), "no file matches --include") {
		t.Errorf("pull with nothing matching: %v", err)
	}
}

func TestPullThroughServerDrawsBar(t *testing.T) {
	h, files, _ := pullFixture(t)
	dir := t.TempDir()
	built, err := app.Build(app.Config{Upstream: h.URL, CacheDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer built.Close()
	srv := httptest.NewServer(built.Main)
	defer srv.Close()

	// No admin API there: pull streams the bytes, and says so.
	t.Setenv("HUBPROXY_ADMIN_LISTEN", closedAddr(t))
	out, err := runCmd(t, "pull", "--server", srv.URL, "--progress", "bar", "--include", "model-*", "org/m")
	if err != nil {
		t.Fatalf("pull --server: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`\r\[=+\] [0-9.]+ KiB / [0-9.]+ KiB  .*/s  ETA 0s  2 files\s*\n`).MatchString(out) {
		t.Errorf("no final bar line in %q", out)
	}
	if !strings.Contains(out, "note: not prefetching server-side: no admin API at ") || !strings.Contains(out, "streaming every byte back to this machine") {
		t.Errorf("pull --server without an admin API does not say it streams:\n%s", out)
	}
	for _, f := range files[:2] {
		if _, err := os.Stat(filepath.Join(dir, "models--org--m", "blobs", blobName(f))); err != nil {
			t.Errorf("%s not in the server's cache: %v", f.Path, err)
		}
	}
	_, err = runCmd(t, "pull", "--server", srv.URL, "org/absent")
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 401 || se.Code != "RepoNotFound" {
		t.Errorf("pull of a missing repo: %v", err)
	}
}

// TestPullChecksSizes runs pull against a server whose file is shorter than
// its listing says.
func TestPullChecksSizes(t *testing.T) {
	t.Setenv("HUBPROXY_ADMIN_LISTEN", closedAddr(t)) // no admin API: pull downloads
	commit := strings.Repeat("a", 40)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/datasets/org/d/revision/"):
			fmt.Fprintf(w, `{"id":"org/d","sha":%q}`, commit)
		case strings.HasPrefix(r.URL.Path, "/api/datasets/org/d/tree/"+commit):
			fmt.Fprint(w, `[{"type":"directory","path":"x","size":0},{"type":"file","path":"x/a.csv","size":10}]`)
		case r.URL.Path == "/datasets/org/d/resolve/"+commit+"/x/a.csv":
			w.Write([]byte("short"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	_, err := runCmd(t, "pull", "--server", srv.URL, "--progress", "none", "datasets/org/d")
	var sm *SizeMismatchError
	if !errors.As(err, &sm) || sm.Path != "x/a.csv" || sm.Want != 10 || sm.Got != 5 {
		t.Errorf("short file: %v", err)
	}
	if _, err := runCmd(t, "pull", "--server", srv.URL, "--repo-type", "bucket", "org/d"); err == nil {
		t.Error("unknown --repo-type accepted")
	}
}

func TestProgressRendering(t *testing.T) {
	var buf bytes.Buffer
	t0 := time.Unix(1000, 0)
	clock := t0
	p := newProgress(&buf, progressBar, 1000)
	p.now, p.start, p.lastT = func() time.Time { return clock }, t0, t0
	p.startFile("model-00001-of-00002.safetensors", 600)
	p.Write(make([]byte, 500))
	clock = t0.Add(time.Second)
	p.tick()
	want := "\r[============>           ] 500 B / 1000 B  500 B/s  ETA 1s  model-00001-of-00002.safetensors"
	if buf.String() != want {
		t.Errorf("bar:\n got %q\nwant %q", buf.String(), want)
	}
	buf.Reset()
	p.finishFile("model-00001-of-00002.safetensors", 600, cameMiss)
	p.startFile("c.json", 400)
	p.Write(make([]byte, 500))
	clock = t0.Add(2 * time.Second)
	p.finish()
	if got := buf.String(); !strings.HasPrefix(got, "\r[========================] 1000 B / 1000 B  500 B/s  ETA 0s  c.json ") || !strings.HasSuffix(got, "\n") {
		t.Errorf("final bar (shorter name blanks the old one): %q", got)
	}
	p.tick() // after finish: nothing more
	if strings.Count(buf.String(), "\r") != 1 {
		t.Errorf("tick after finish drew: %q", buf.String())
	}

	buf.Reset()
	q := newProgress(&buf, progressAuto, 4<<30)
	if q.mode != progressPlain {
		t.Errorf("auto on a buffer chose %q", q.mode)
	}
	q.Write(make([]byte, 1<<20))
	q.tick()
	if !regexp.MustCompile(`^progress: 1.00 MiB of 4.00 GiB \(0%\), .*/s, ETA .+\n$`).MatchString(buf.String()) {
		t.Errorf("plain line: %q", buf.String())
	}
}
