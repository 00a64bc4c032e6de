package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
)

// minio is the cluster scenario's S3 server: the MinIO binary the
// shared-store tests run (miniotest.Version, built by `make minio`),
// launched as they launch it (miniotest.Launch) and tracked as a child of
// the harness like the proxies, on a loopback port, with one bucket. Every
// restart starts it on an empty data directory, so each repetition begins
// with a cold store.
type minio struct {
	bin     string
	procs   *procs
	workDir string

	// Set by restart; used from the run's goroutine only.
	n   int
	srv *miniotest.Server
	p   *proc
	dir string
}

// restart stops the server if it runs, then starts it on a fresh data
// directory and creates the bucket.
func (m *minio) restart(ctx context.Context) error {
	m.stop()
	m.n++
	m.dir = filepath.Join(m.workDir, fmt.Sprintf("minio-%d", m.n))
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return err
	}
	log := m.dir + ".log"
	srv, err := miniotest.Launch(miniotest.Options{Binary: m.bin, Dir: filepath.Join(m.dir, "data"), Log: log, Env: childEnv()})
	if err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	m.srv, m.p = srv, m.procs.adopt(srv.Process(), log)
	return ctx.Err()
}

// url is the shared-store URL of prefix in the bucket, as a node takes it.
func (m *minio) url(prefix string) string { return m.srv.URL(prefix) }

// nodeEnv is what a hubproxy node needs to reach the server: its keys, as a
// deployed node takes them from the standard AWS variables.
func (m *minio) nodeEnv() []string { return m.srv.Env() }

// stop ends the server and removes its data, which holds a copy of the file.
func (m *minio) stop() {
	if m.p == nil {
		return
	}
	m.procs.stop(m.p, 5*time.Second)
	m.p, m.srv = nil, nil
	_ = os.RemoveAll(m.dir)
}

// EnsureMinio returns the MinIO binary the cluster scenario runs: bin if
// given, else $HUBPROXY_MINIO, else .tools/minio-<version>/minio under the
// hubproxy module at moduleDir ("" = the one the working directory is in),
// as the shared-store tests find it. A missing binary is built there with
// `make minio` when build is true (about two minutes), and otherwise is an
// error giving that command.
func EnsureMinio(ctx context.Context, bin, moduleDir string, build bool, log io.Writer) (string, error) {
	if bin == "" {
		bin = os.Getenv("HUBPROXY_MINIO")
	}
	if bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("harness: MinIO binary: %w", err)
		}
		return bin, nil
	}
	root, err := moduleRoot(ctx, moduleDir)
	if err != nil {
		return "", err
	}
	bin = filepath.Join(root, ".tools", "minio-"+miniotest.Version, "minio")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if !build {
		return "", fmt.Errorf("harness: the cluster scenario needs MinIO %s; run `make minio` in %s (or give -minio PATH)", miniotest.Version, root)
	}
	fmt.Fprintf(log, "building MinIO %s with `make minio` (once per version, about two minutes)\n", miniotest.Version)
	cmd := exec.CommandContext(ctx, "make", "minio")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("harness: make minio: %v: %s", err, tail(out))
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("harness: make minio built no %s: %w", bin, err)
	}
	return bin, nil
}

// moduleRoot is dir, or when it is "" the root of the hubproxy module as
// seen from the working directory: the main module there, or the one the
// bench module's replace directive points at.
func moduleRoot(ctx context.Context, dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	o, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/hubproxy/hubproxy").Output()
	root := strings.TrimSpace(string(o))
	if err != nil || root == "" {
		return "", errors.Join(errors.New("harness: cannot find the hubproxy module from the working directory (go list -m github.com/hubproxy/hubproxy)"), err)
	}
	return root, nil
}
