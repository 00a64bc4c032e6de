package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/cachemaint"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// TestUnknownSubcommandsFail: a subcommand this build lacks is an error
// (so a non-zero exit) at every level, with a suggestion, where groups
// used to print their help and exit 0.
func TestUnknownSubcommandsFail(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cache", "rmm", "org/m"}, `unknown command "rmm" for "hubproxy cache"; did you mean rm?`},
		{[]string{"gpu", "foo"}, `unknown command "foo" for "hubproxy gpu"`},
		{[]string{"cache", "store", "foo"}, `unknown command "foo" for "hubproxy cache store"`},
		{[]string{"cache", "pinn"}, `did you mean pin or pins?`},
		{[]string{"pulll"}, `unknown command "pulll" for "hubproxy"; did you mean pull?`},
		{[]string{"completion", "foo"}, `unknown command "foo" for "hubproxy completion"`},
	} {
		_, err := runCmd(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("hubproxy %s: %v, want an error with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	// A group alone still shows its help, successfully.
	for _, args := range [][]string{{"cache"}, {"gpu"}, {"cache", "store"}, {}} {
		out, err := runCmd(t, args...)
		if err != nil || !strings.Contains(out, "Available Commands:") {
			t.Errorf("hubproxy %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestPruneDurationsAreTheConfigs: --older-than and --stale-after take what
// a config duration takes, and refuse days the same way.
func TestPruneDurationsAreTheConfigs(t *testing.T) {
	dir := t.TempDir()
	for _, flag := range []string{"--older-than", "--stale-after"} {
		_, err := runCmd(t, "cache", "prune", "--cache-dir", dir, "--max-bytes", "1GiB", flag, "30d")
		if _, cfgErr := parseDuration("30d"); err == nil || cfgErr == nil || !strings.Contains(err.Error(), cfgErr.Error()) ||
			!strings.Contains(err.Error(), "write 720h") {
			t.Errorf("prune %s 30d: %v, want the config's error %v", flag, err, cfgErr)
		}
	}
	if out, err := runCmd(t, "cache", "prune", "--cache-dir", dir, "--older-than", "720h", "--dry-run"); err != nil {
		t.Errorf("prune --older-than 720h: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "cache", "prune", "--cache-dir", dir, "--max-bytes", "0"); err == nil || !strings.Contains(err.Error(), "would empty the cache") {
		t.Errorf("prune --max-bytes 0: %v", err)
	}
}

// TestCacheRm removes one revision (keeping the blobs another revision
// links) and then the whole repo; --dry-run removes nothing, and a cache
// a server holds is refused.
func TestCacheRm(t *testing.T) {
	h := hubtest.NewT(t, hubtest.Options{})
	shared := hubtest.File{Path: "config.json", Data: []byte(`{"model_type":"llama"}`)}
	v1Only := hubtest.File{Path: "a.safetensors", Data: hubtest.RandomBytes(1, 4000)}
	v2Only := hubtest.File{Path: "b.safetensors", Data: hubtest.RandomBytes(2, 5000)}
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/m", Files: []hubtest.File{shared, v1Only}})
	repo := hub.MustRepo(hub.Model, "org/m")
	v2 := h.Commit(repo, "v2", []hubtest.File{shared, v2Only})
	dir := t.TempDir()
	for _, rev := range []string{"main", "v2"} {
		if out, err := runCmd(t, "pull", "--upstream", h.URL, "--cache-dir", dir, "--progress", "none", "--revision", rev, "org/m"); err != nil {
			t.Fatalf("pull %s: %v\n%s", rev, err, out)
		}
	}
	root := filepath.Join(dir, "models--org--m")
	blob := func(f hubtest.File) string { return filepath.Join(root, "blobs", blobName(f)) }
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }

	out, err := runCmd(t, "cache", "rm", "--cache-dir", dir, "--dry-run", "org/m@v2")
	if err != nil || !strings.Contains(out, "would remove org/m@v2 ("+v2[:12]+"): 1 file, ") || !strings.Contains(out, "kept 1 file another cached revision uses") {
		t.Fatalf("rm --dry-run: %v\n%s", err, out)
	}
	if !exists(blob(v2Only)) || !exists(filepath.Join(root, "snapshots", v2)) {
		t.Fatal("rm --dry-run removed something")
	}

	// A server holds the cache: rm refuses, and says what to do.
	unlock, err := cache.NewLayout(dir).Lock()
	if err != nil {
		t.Fatal(err)
	}
	_, err = runCmd(t, "cache", "rm", "--cache-dir", dir, "org/m@v2")
	unlock()
	if !errors.Is(err, cache.ErrLocked) || !strings.Contains(err.Error(), "stop the server first") {
		t.Fatalf("rm of a locked cache: %v", err)
	}
	if !exists(blob(v2Only)) {
		t.Fatal("rm of a locked cache removed a blob")
	}

	out, err = runCmd(t, "cache", "rm", "--cache-dir", dir, "org/m@v2")
	if err != nil || !strings.Contains(out, "removed org/m@v2") {
		t.Fatalf("rm @v2: %v\n%s", err, out)
	}
	switch {
	case exists(blob(v2Only)):
		t.Error("the blob only v2 used is still there")
	case !exists(blob(shared)) || !exists(blob(v1Only)):
		t.Error("rm @v2 removed a blob main still uses")
	case exists(filepath.Join(root, "snapshots", v2)) || exists(filepath.Join(root, "refs", "v2")):
		t.Error("v2's snapshot or ref is still there")
	case !exists(filepath.Join(root, "refs", "main")):
		t.Error("rm @v2 removed refs/main")
	}
	if _, err := runCmd(t, "cache", "rm", "--cache-dir", dir, "org/m@v2"); !errors.Is(err, cachemaint.ErrNotCached) || !strings.Contains(err.Error(), "cached revisions: main (") {
		t.Errorf("rm of a revision no longer cached: %v", err)
	}

	out, err = runCmd(t, "cache", "rm", "--cache-dir", dir, "org/m")
	if err != nil || !strings.Contains(out, "removed org/m: 2 files, ") || !strings.Contains(out, "1 revision") {
		t.Fatalf("rm of the repo: %v\n%s", err, out)
	}
	if exists(root) {
		t.Error("the repo's folder is still there")
	}
	if _, err := runCmd(t, "cache", "rm", "--cache-dir", dir, "org/m"); err == nil || !strings.Contains(err.Error(), "org/m: not in the cache") {
		t.Errorf("rm of a repo not cached: %v", err)
	}
	if _, err := runCmd(t, "cache", "rm", "--cache-dir", dir, "org/../m"); err == nil {
		t.Error("rm of an invalid repo id accepted")
	}
}
