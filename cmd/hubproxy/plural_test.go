package main

import (
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// TestCountsReadAsEnglish runs each command whose output counts something
// with one (and, where it can be, zero) of it: "1 file", never "1 files".
func TestCountsReadAsEnglish(t *testing.T) {
	h := hubtest.NewT(t, hubtest.Options{})
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/one", Files: append(hubtest.ShardedModel("model", 1, 1, 8, 4),
		hubtest.File{Path: "config.json", Data: []byte(`{}`)})})
	dir := t.TempDir()
	run := func(want string, args ...string) {
		t.Helper()
		out, err := runCmd(t, args...)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %v; want %q in\n%s", strings.Join(args, " "), err, want, out)
		}
	}

	run("(0 repos)", "cache", "du", "--cache-dir", dir)
	run("1 tensor in 1 file,", "ls", "--upstream", h.URL, "--cache-dir", t.TempDir(), "org/one")
	pull := []string{"pull", "--upstream", h.URL, "--cache-dir", dir, "--progress", "none", "--include", "config.json", "org/one"}
	run("): 1 file, 2 B", pull...)
	run("pulled 1 file (2 B)", pull...)
	run("verified 1 blob (2 B): 0 corrupt", "cache", "verify", "--cache-dir", dir)
	run("(1 repo)", "cache", "du", "--cache-dir", dir)
	run("removed 1 file, 2 B", "cache", "prune", "--cache-dir", dir, "--max-bytes", "1")
}

func TestSizeMismatchCountsBytes(t *testing.T) {
	e := &SizeMismatchError{Path: "a.bin", Want: 2, Got: 1}
	if got := e.Error(); got != "a.bin: received 1 byte, the listing says 2" {
		t.Errorf("SizeMismatchError = %q", got)
	}
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{plural(0, "repo"), "0 repos"},
		{plural(1, "file"), "1 file"},
		{plural(int64(2), "blob"), "2 blobs"},
		{plural(uint64(1), "tensor"), "1 tensor"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
