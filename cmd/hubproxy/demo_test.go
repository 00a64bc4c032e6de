package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/header"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// TestDemoServesATensor runs `hubproxy demo` on a free port, reads the
// address from its instructions, and follows them as a user would with curl.
func TestDemoServesATensor(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	root := newRootCmd()
	if found, _, err := root.Find([]string{"demo"}); err != nil || found == root {
		root.AddCommand(newDemoCmd())
	}
	root.SetArgs([]string{"demo", "--listen", "127.0.0.1:0", "--dir", dir})
	root.SetOut(pw)
	root.SetErr(io.Discard)
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		pw.Close()
		done <- err
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("demo: %v", err)
		}
	}()

	var base string
	var help strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		help.WriteString(sc.Text() + "\n")
		if m := regexp.MustCompile(`^Listening on (http://\S+)\.`).FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
			break
		}
	}
	if base == "" {
		t.Fatalf("no address in the demo's output:\n%s", help.String())
	}
	go io.Copy(io.Discard, pr)

	// curl -I …/resolve/main/config.json
	resp, err := http.Head(base + "/demo/tiny-llama/resolve/main/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !hub.IsCommit(resp.Header.Get("X-Repo-Commit")) || resp.Header.Get("ETag") == "" {
		t.Errorf("HEAD config.json: %d %v", resp.StatusCode, resp.Header)
	}

	// curl …/models/demo/tiny-llama/tensors
	resp, err = http.Get(base + "/models/demo/tiny-llama/tensors")
	if err != nil {
		t.Fatal(err)
	}
	var listing struct {
		Tensors []struct{ Name, File string }
	}
	err = json.NewDecoder(resp.Body).Decode(&listing)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || len(listing.Tensors) != 21 {
		t.Fatalf("tensor listing: %d %v, %d tensors", resp.StatusCode, err, len(listing.Tensors))
	}

	// curl …/tensors/<name>: compared with the bytes on disk, located by
	// parsing the shard's header independently of the server.
	for _, name := range []string{"model.norm.weight", "model.layers.0.self_attn.q_proj.weight"} {
		resp, err = http.Get(base + "/models/demo/tiny-llama/tensors/" + name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", name, resp.StatusCode, err)
		}
		if want := tensorOnDisk(t, dir, name); !bytes.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s: got %d bytes, want the %d on disk (equal %v)", name, len(got), len(want), bytes.Equal(got, want))
		}
		if resp.Header.Get("X-Tensor-Dtype") != "BF16" {
			t.Errorf("%s: dtype header %q", name, resp.Header.Get("X-Tensor-Dtype"))
		}
	}
}

// tensorOnDisk reads a tensor's bytes from the demo repo through the index
// and the safetensors header parser.
func tensorOnDisk(t *testing.T, dir, name string) []byte {
	t.Helper()
	repo := filepath.Join(dir, "demo", "tiny-llama")
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	b, err := os.ReadFile(filepath.Join(repo, "model.safetensors.index.json"))
	if err != nil || json.Unmarshal(b, &index) != nil {
		t.Fatalf("index: %v", err)
	}
	f, err := os.Open(filepath.Join(repo, index.WeightMap[name]))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, _ := f.Stat()
	h, err := header.Parse(f, info.Size(), header.Options{})
	if err != nil {
		t.Fatalf("%s: %v", index.WeightMap[name], err)
	}
	tn, ok := h.Lookup(name)
	if !ok {
		t.Fatalf("%s not in %s", name, index.WeightMap[name])
	}
	off, n := h.FileRange(tn)
	out := make([]byte, n)
	if _, err := f.ReadAt(out, int64(off)); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestVersionCommand(t *testing.T) {
	out, err := runCmd(t, "version")
	if err != nil || !regexp.MustCompile(`(?m)^hubproxy \S+\n(?s:.*)^go:\s+go1\.\d+`).MatchString(out) {
		t.Errorf("version: %v\n%s", err, out)
	}
	bi := readBuildInfo("v9.9.9", "abc123")
	if bi.Version != "v9.9.9" || bi.Commit != "abc123" || bi.Modified || !strings.HasPrefix(bi.GoVersion, "go") {
		t.Errorf("stamped build info = %+v", bi)
	}
}

// TestVersionFlagPrintsTheVersionCommand: `hubproxy --version` and
// `hubproxy version` print the same text.
func TestVersionFlagPrintsTheVersionCommand(t *testing.T) {
	want, err := runCmd(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--version", "-v"} {
		if got, err := runCmd(t, flag); err != nil || got != want {
			t.Errorf("hubproxy %s: %v\n got %q\nwant %q", flag, err, got, want)
		}
	}
}
