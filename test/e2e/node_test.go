package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// nodePackage is the npm package the client drives; its node_modules folder
// tells whether `npm ci` already ran.
const nodePackage = "node_modules/@huggingface/hub/package.json"

// requireNode returns the path of the node binary, failing (never skipping)
// when it is missing: a skipped e2e test reads as green in CI.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH (%v): the e2e test needs node >= 20 and npm to run the real @huggingface/hub client; install them (e.g. apt-get install nodejs npm) and run again", err)
	}
	return node
}

// ensureNodeModules runs `npm ci` in dir when the pinned package is not
// installed, or another version is. package-lock.json pins @huggingface/hub
// exactly, so the install is reproducible.
func ensureNodeModules(ctx context.Context, t *testing.T, dir string) {
	t.Helper()
	want, err := pinnedVersion(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := installedVersion(filepath.Join(dir, nodePackage))
	if err == nil && got == want {
		return
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("%s is missing and npm is not on PATH (%v): run `npm ci` in %s", nodePackage, err, dir)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	t.Logf("@huggingface/hub %s wanted, installed: %q (%v); running npm ci in %s", want, got, err, dir)
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if err := runStreaming(ctx, t, cmd, "npm"); err != nil {
		t.Fatalf("npm ci: %v", err)
	}
	if got, err := installedVersion(filepath.Join(dir, nodePackage)); err != nil || got != want {
		t.Fatalf("after npm ci, @huggingface/hub is %q (%v); package.json pins %s", got, err, want)
	}
}

// pinnedVersion is the exact @huggingface/hub version package.json asks for.
func pinnedVersion(packageJSON string) (string, error) {
	b, err := os.ReadFile(packageJSON)
	if err != nil {
		return "", err
	}
	var p struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("%s: %w", packageJSON, err)
	}
	v := p.Dependencies["@huggingface/hub"]
	if v == "" || strings.ContainsAny(v, "^~<>=* ") {
		return "", fmt.Errorf("%s must pin @huggingface/hub to an exact version, has %q", packageJSON, v)
	}
	return v, nil
}

// installedVersion is the version of the package whose package.json is at path.
func installedVersion(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var p struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return p.Version, nil
}

// runStreaming runs cmd (built with ctx) with stdout and stderr sent line by line to t.Log, so
// a long run shows progress and a failure keeps its context. It returns once
// the process has exited and every line has been logged.
func runStreaming(ctx context.Context, t *testing.T, cmd *exec.Cmd, prefix string) error {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	// A killed process may leave children holding the pipe; WaitDelay bounds
	// how long Wait then keeps it open.
	cmd.WaitDelay = 5 * time.Second

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			t.Logf("%s: %s", prefix, sc.Text())
		}
		// Drain whatever a too-long line left behind so the writer never blocks.
		_, _ = io.Copy(io.Discard, pr)
	}()

	err := cmd.Start()
	if err == nil {
		err = cmd.Wait()
	}
	_ = pw.Close()
	wg.Wait()
	if err != nil && ctx.Err() != nil {
		return errors.Join(err, context.Cause(ctx))
	}
	return err
}
