// Package miniotest runs a real S3 server, MinIO, on loopback for tests, so
// the shared store is tested against the S3 protocol as a server speaks it
// (ranged GETs, If-None-Match: * answered with 412, 404 bodies, listing
// pages), not against a fake of it.
//
// The server is a binary built from the Go module proxy at Version, into
// .tools/minio-<Version>/ under the repository root, which git ignores:
// `make test` builds it first (make minio); a test run without it builds it
// here, once, under a lock. MinIO is never a dependency in go.mod.
package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Version is the MinIO module version the tests run; the Makefile's
// MINIO_VERSION must say the same (TestMakefileAgrees checks).
const Version = "v0.0.0-20260212201848-7aac2a2c5b7c"

// The test server's credentials and bucket.
const (
	AccessKey = "hubproxytest"
	SecretKey = "hubproxytest-secret"
	Bucket    = "hubproxy"
)

// Server is one MinIO process on a loopback port, with one bucket.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT

	bin, dir, log, addr string

	mu  sync.Mutex
	cmd *exec.Cmd // nil while stopped
}

// Start runs a MinIO server on a fresh directory, creates Bucket and stops
// the server when the test ends. It fails the test if MinIO cannot be built
// or started: tests that need a real S3 server never skip.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	base := t.TempDir()
	s := &Server{Endpoint: "http://" + addr, bin: bin, dir: filepath.Join(base, "data"), log: filepath.Join(base, "minio.log"), addr: addr}
	t.Cleanup(s.Stop)
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(Bucket)}); err != nil {
		t.Fatalf("minio: creating bucket: %v", err)
	}
	return s
}

// URL is the shared-store URL of prefix in the bucket.
func (s *Server) URL(prefix string) string {
	u := "s3://" + Bucket
	if prefix != "" {
		u += "/" + prefix
	}
	return u + "?endpoint=" + s.Endpoint + "&region=us-east-1&use_path_style=true"
}

// DataDir is where the server keeps its objects on disk, for tests that
// damage them under it, as bit rot would.
func (s *Server) DataDir() string { return s.dir }

// Env is the environment a hubproxy process needs to reach the server.
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true"}
}

// SetEnv sets Env in this process for the rest of the test (in-process
// stores read the standard AWS variables, as a deployed one does).
func (s *Server) SetEnv(t testing.TB) {
	t.Helper()
	for _, kv := range s.Env() {
		k, v, _ := cut(kv)
		t.Setenv(k, v)
	}
}

func cut(kv string) (string, string, bool) {
	for i := range kv {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// Client is an S3 client of the server with its root credentials, for tests
// that look at or tamper with objects directly.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
}

// Stop kills the server (as a crash would); Restart brings it back on the
// same port and data.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart starts a stopped server again.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	cmd := exec.Command(s.bin, "server", "--address", s.addr, "--quiet", s.dir)
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+AccessKey, "MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=on")
	logf, err := os.OpenFile(s.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("minio: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.Endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.cmd = cmd
				return nil
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			out, _ := os.ReadFile(s.log)
			return fmt.Errorf("minio did not become live on %s within 60s (last: %v); its log:\n%s", s.addr, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Binary returns the MinIO binary: $HUBPROXY_MINIO if set (it must exist),
// else .tools/minio-<Version>/minio under the repository root, built there
// first if missing.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HUBPROXY_MINIO"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("HUBPROXY_MINIO=%s: %v", p, err)
		}
		return p
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, ".tools", "minio-"+Version)
	bin := filepath.Join(dir, "minio")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := build(root, dir, bin); err != nil {
		t.Fatalf("building MinIO %s (make minio does the same): %v", Version, err)
	}
	return bin
}

// build installs MinIO into dir, holding a lock directory so that test
// binaries of several packages started at once build it once.
func build(root, dir, bin string) error {
	lock := filepath.Join(root, ".tools", "minio.lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Minute)
	for {
		err := os.Mkdir(lock, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return err
		}
		if info, serr := os.Stat(lock); serr == nil && time.Since(info.ModTime()) > 15*time.Minute {
			os.Remove(lock) // left by a build that was killed
		}
		if time.Now().After(deadline) {
			return errors.New("timed out waiting for another build of MinIO")
		}
		time.Sleep(time.Second)
	}
	defer os.Remove(lock)
	if _, err := os.Stat(bin); err == nil {
		return nil // built by whoever held the lock
	}
	// Install into a fresh directory and rename it into place, so a build
	// killed half-way never leaves a binary that looks finished.
	var rnd [4]byte
	rand.Read(rnd[:])
	tmp := dir + ".tmp-" + hex.EncodeToString(rnd[:])
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", "github.com/minio/minio@"+Version)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	os.Remove(dir) // an empty directory left by hand; a full one stays and fails the rename
	return os.Rename(tmp, dir)
}

// repoRoot is the nearest directory above the working directory with a
// go.mod: the module root, where .tools lives.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("miniotest: no go.mod above the working directory")
		}
		dir = parent
	}
}
