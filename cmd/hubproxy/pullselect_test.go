package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// llamaFixture is a repo laid out like meta-llama's: weights at the top,
// the original checkpoint under original/, one level deeper too.
func llamaFixture(t *testing.T) *hubtest.Hub {
	t.Helper()
	h := hubtest.NewT(t, hubtest.Options{})
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/llama", Files: []hubtest.File{
		{Path: "config.json", Data: []byte(`{"model_type":"llama"}`)},
		{Path: "model.safetensors", Data: hubtest.RandomBytes(1, 3000)},
		{Path: "original/params.json", Data: []byte(`{"dim":8}`)},
		{Path: "original/sub/consolidated.00.pth", Data: hubtest.RandomBytes(2, 2000)},
	}})
	return h
}

// TestPullSelectsAsHuggingFaceHub: --include and --exclude pick what
// snapshot_download's allow_patterns and ignore_patterns pick, and named
// files are exactly those, as hf download REPO FILE... takes them.
func TestPullSelectsAsHuggingFaceHub(t *testing.T) {
	h := llamaFixture(t)
	dir := t.TempDir()
	pull := func(args ...string) (string, error) {
		return runCmd(t, append([]string{"pull", "--upstream", h.URL, "--cache-dir", dir, "--progress", "plain"}, args...)...)
	}
	for _, tc := range []struct {
		args  []string
		files []string
	}{
		// path.Match's "*" stopped at "/" and found only params.json.
		{[]string{"--include", "original/*"}, []string{"original/params.json", "original/sub/consolidated.00.pth"}},
		{[]string{"--include", "original/"}, []string{"original/params.json", "original/sub/consolidated.00.pth"}},
		{[]string{"--include", "original/", "--exclude", "*.pth"}, []string{"original/params.json"}},
		{[]string{"--exclude", "original/*"}, []string{"config.json", "model.safetensors"}},
		{[]string{"--include", "*.json"}, []string{"config.json", "original/params.json"}},
		{[]string{"org/llama", "original/params.json", "config.json"}, []string{"config.json", "original/params.json"}},
	} {
		args := tc.args
		if args[0] != "org/llama" {
			args = append(args, "org/llama")
		}
		out, err := pull(args...)
		if err != nil {
			t.Errorf("pull %q: %v\n%s", args, err, out)
			continue
		}
		if want := "org/llama@main ("; !strings.Contains(out, want) || !strings.Contains(out, "): "+plural(len(tc.files), "file")+",") {
			t.Errorf("pull %q pulled other than %q:\n%s", args, tc.files, out)
		}
		for _, f := range tc.files {
			if !strings.Contains(out, " "+f+" (") {
				t.Errorf("pull %q: %s not reported:\n%s", args, f, out)
			}
		}
	}
	if _, err := pull("org/llama", "original/absent.json"); err == nil || !strings.Contains(err.Error(), `has no file "original/absent.json"`) {
		t.Errorf("pull of a file the repo lacks: %v", err)
	}
	if _, err := pull("--include", "*.json", "org/llama", "config.json"); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("pull with file names and --include: %v", err)
	}
	if _, err := pull("org/llama", "../etc/passwd"); err == nil {
		t.Error("pull of an invalid path accepted")
	}
}

// TestPullSaysHitOrFetched: a file the cache had is a hit, not "fetched".
func TestPullSaysHitOrFetched(t *testing.T) {
	h := llamaFixture(t)
	dir := t.TempDir()
	args := []string{"pull", "--upstream", h.URL, "--cache-dir", dir, "--progress", "plain", "org/llama", "config.json"}
	if out, err := runCmd(t, args...); err != nil || !strings.Contains(out, "fetched config.json (") || strings.Contains(out, "already cached") {
		t.Fatalf("first pull: %v\n%s", err, out)
	}
	out, err := runCmd(t, append(args, "model.safetensors")...)
	if err != nil || !strings.Contains(out, "hit config.json (") || !strings.Contains(out, "fetched model.safetensors (") ||
		!strings.Contains(out, ": 1 already cached, 1 fetched") {
		t.Fatalf("second pull: %v\n%s", err, out)
	}
}

// TestProgressNamesTheLargestFileInFlight: with several files at once, the
// bar names the one the wait is for, not the last small one started.
func TestProgressNamesTheLargestFileInFlight(t *testing.T) {
	var buf bytes.Buffer
	t0 := time.Unix(1000, 0)
	p := newProgress(&buf, progressBar, 1000)
	p.now, p.start, p.lastT = func() time.Time { return t0.Add(time.Second) }, t0, t0
	p.startFile("model-00001-of-00002.safetensors", 900)
	p.startFile("config.json", 50)
	p.startFile("tokenizer.json", 50)
	p.tick()
	if got := buf.String(); !strings.HasSuffix(got, "  model-00001-of-00002.safetensors +2") {
		t.Errorf("bar with three in flight: %q", got)
	}
	p.finishFile("config.json", 50, cameHit)
	p.finishFile("model-00001-of-00002.safetensors", 900, cameMiss)
	buf.Reset()
	p.tick()
	if got := buf.String(); !strings.Contains(got, "  tokenizer.json") || strings.Contains(got, "+") {
		t.Errorf("bar with one in flight: %q", got)
	}
	p.finishFile("tokenizer.json", 50, cameMiss)
	buf.Reset()
	p.tick()
	if got := buf.String(); !strings.Contains(got, "  3 files") {
		t.Errorf("bar with none in flight: %q", got)
	}
}

// TestPullFlagHelpIsTyped: flags say what they take, and defaults are
// written as the README writes them.
func TestPullFlagHelpIsTyped(t *testing.T) {
	for cmd, wants := range map[string][]string{
		"pull":        {"--include pattern", "--exclude pattern", "--jobs int", "--admin string"},
		"cache prune": {"--max-bytes size", "--older-than duration", "--stale-after duration", "(default 1h)"},
		"gpu bench":   {"--size size", "(default 1GiB)", "--budget size"},
		"serve": {"--access-ttl duration", "(default 1m)", "--cache-max-bytes size", "(default 100GiB)",
			"--read-ahead int", "--allow-repos list", "--pins list", "'hubproxy cache pin' adds"},
	} {
		out, err := runCmd(t, append(strings.Fields(cmd), "--help")...)
		if err != nil {
			t.Fatalf("%s --help: %v", cmd, err)
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("%s --help lacks %q:\n%s", cmd, want, out)
			}
		}
		if n := strings.Count(out, "HUBPROXY_UPSTREAM_TOKEN"); cmd == "serve" && n != 1 {
			t.Errorf("serve --help names HUBPROXY_UPSTREAM_TOKEN %d times", n)
		}
		for _, bad := range []string{"1h0m0s", "1m0s", "stringArray", "--max-bytes string", "--older-than string", "--size string",
			"--access-ttl string", "--cache-max-bytes string", "--pins hubproxy"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s --help shows %q:\n%s", cmd, bad, out)
			}
		}
	}
}

// TestPinOfAnUncachedRepoSaysSo: the pin is recorded, with a note.
func TestPinOfAnUncachedRepoSaysSo(t *testing.T) {
	dir := t.TempDir()
	out, err := runCmd(t, "cache", "pin", "--cache-dir", dir, "datasets/org/later@v1")
	if err != nil || !strings.Contains(out, "pinned datasets/org/later@v1") ||
		!strings.Contains(out, "note: datasets/org/later@v1 is not in the cache yet; it is pinned anyway") ||
		!strings.Contains(out, "hubproxy pull org/later --repo-type dataset --revision v1") {
		t.Fatalf("pin of an uncached repo: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".hubproxy", "pins")); err != nil || !strings.Contains(string(b), "datasets/org/later@v1") {
		t.Errorf("pin not recorded: %v %q", err, b)
	}
}
