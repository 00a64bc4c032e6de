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

// nodePackages are the npm packages the clients drive (client.mjs,
// s3client.mjs); their folders in node_modules tell whether `npm ci` already
// ran, and with today's package.json.
var nodePackages = []string{"@huggingface/hub", "@aws-sdk/client-s3"}

// requireNode returns the path of the node binary, failing (never skipping)
// when it is missing: a skipped e2e test reads as green in CI.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH (%v): the e2e tests need node >= 20 and npm to run the real @huggingface/hub and @aws-sdk/client-s3 clients; install them (e.g. apt-get install nodejs npm) and run again", err)
	}
	return node
}

// ensureNodeModules runs `npm ci` in dir when a pinned package is not
// installed, or another version is. package.json pins each exactly and
// package-lock.json the rest, so the install is reproducible.
func ensureNodeModules(ctx context.Context, t *testing.T, dir string) {
	t.Helper()
	stale := func() (string, error) {
		for _, name := range nodePackages {
			want, err := pinnedVersion(filepath.Join(dir, "package.json"), name)
			if err != nil {
				return "", err
			}
			got, err := installedVersion(filepath.Join(dir, "node_modules", name, "package.json"))
			if err != nil || got != want {
				return fmt.Sprintf("%s %s wanted, installed: %q (%v)", name, want, got, err), nil
			}
		}
		return "", nil
	}
	why, err := stale()
	if err != nil {
		t.Fatal(err)
	}
	if why == "" {
		return
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("%s, and npm is not on PATH (%v): run `npm ci` in %s", why, err, dir)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	t.Logf("%s; running npm ci in %s", why, dir)
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if err := runStreaming(ctx, t, cmd, "npm"); err != nil {
		t.Fatalf("npm ci: %v", err)
	}
	if why, err := stale(); err != nil || why != "" {
		t.Fatalf("after npm ci: %s %v", why, err)
	}
}

// pinnedVersion is the exact version of package name that package.json asks for.
func pinnedVersion(packageJSON, name string) (string, error) {
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
	v := p.Dependencies[name]
	if v == "" || strings.ContainsAny(v, "^~<>=* ") {
		return "", fmt.Errorf("%s must pin %s to an exact version, has %q", packageJSON, name, v)
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
