// Package miniotest runs a real S3 server, MinIO, on loopback for tests, so
// the shared store is tested against the S3 protocol as a server speaks it
// (ranged GETs, If-None-Match: * answered with 412, 404 bodies, listing
// pages), not against a fake of it.
//
// The server is a binary built from the Go module proxy at Version, into
// .tools/minio-<Version>/ under the repository root, which git ignores:
// `make test` builds it first (make minio); a test run without it builds it
// here, once, under a lock. MinIO is never a dependency in go.mod.
//
// It is the one MinIO launcher: tests call Start, and the programs that
// drive hubproxy against a real store (soak, bench) call Launch, so all run
// the same binary the same way, supervised by internal/child.
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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hubproxy/hubproxy/internal/child"
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

	opts Options // with the defaults filled in

	mu   sync.Mutex
	proc *child.Process // nil while stopped
}

// Options say how Launch runs a server.
type Options struct {
	Binary string // the MinIO binary (Binary finds the tests' one)
	Dir    string // its data directory, kept across restarts
	Log    string // the file its output is appended to
	// Addr is the loopback address it listens on; "" picks a free port.
	Addr string
	// User and Password are its root credentials; "" means AccessKey and
	// SecretKey.
	User, Password string
	// Env is the environment it runs in, MinIO's own settings added; nil
	// means this process's.
	Env []string
}

// Start runs a MinIO server on a fresh directory, creates Bucket and stops
// the server when the test ends. It fails the test if MinIO cannot be built
// or started: tests that need a real S3 server never skip.
func Start(t testing.TB) *Server {
	t.Helper()
	base := t.TempDir()
	s, err := Launch(Options{Binary: Binary(t), Dir: filepath.Join(base, "data"), Log: filepath.Join(base, "minio.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Launch runs a MinIO server as o says, waits until it is live and has
// created Bucket, and returns it; the caller stops it. It is Start for the
// programs that drive hubproxy against a real store (soak, bench), so that
// they run MinIO exactly as the tests do.
func Launch(o Options) (*Server, error) {
	if o.Binary == "" || o.Dir == "" || o.Log == "" {
		return nil, errors.New("miniotest: Launch needs a binary, a data directory and a log file")
	}
	if o.User == "" {
		o.User, o.Password = AccessKey, SecretKey
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	if o.Addr == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		o.Addr = l.Addr().String()
		l.Close()
	}
	s := &Server{Endpoint: "http://" + o.Addr, opts: o}
	if err := s.Relaunch(); err != nil {
		return nil, err
	}
	if err := s.createBucket(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// createBucket creates Bucket, retrying while MinIO finishes starting (it
// answers its health check a little before it takes every request).
func (s *Server) createBucket() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.client(&http.Client{Transport: &http.Transport{Proxy: nil}})
	for {
		_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(Bucket)})
		if err == nil {
			return nil
		}
		p := s.Process()
		select {
		case <-p.Done():
			return fmt.Errorf("minio exited (%v) before it created its bucket; its log:\n%s", p.Err(), s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("minio: creating bucket %s: %v; its log:\n%s", Bucket, err, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
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
func (s *Server) DataDir() string { return s.opts.Dir }

// Env is the environment a hubproxy process needs to reach the server.
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.opts.User, "AWS_SECRET_ACCESS_KEY=" + s.opts.Password,
		"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true"}
}

// SetEnv sets Env in this process for the rest of the test (in-process
// stores read the standard AWS variables, as a deployed one does).
func (s *Server) SetEnv(t testing.TB) {
	t.Helper()
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Client is an S3 client of the server with its root credentials, for tests
// that look at or tamper with objects directly.
func (s *Server) Client() *s3.Client { return s.client(nil) }

func (s *Server) client(hc *http.Client) *s3.Client {
	o := s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.opts.User, s.opts.Password, ""),
	}
	if hc != nil {
		o.HTTPClient = hc
	}
	return s3.New(o)
}

// Process is the running MinIO process (nil while stopped), for callers
// that account for their children (bench).
func (s *Server) Process() *child.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// Stop kills the server (as a crash would); Restart brings it back on the
// same port and data.
func (s *Server) Stop() { s.Kill() }

// Kill kills the server with SIGKILL, as a crash would, and reports
// whether it was running.
func (s *Server) Kill() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return false
	}
	s.proc.Kill()
	s.proc = nil
	return true
}

// Restart starts a stopped server again.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.Relaunch(); err != nil {
		t.Fatal(err)
	}
}

// Relaunch starts a stopped server again, on the same port and data, and
// waits until it is live; a running one is left alone.
func (s *Server) Relaunch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return nil
	}
	o := s.opts
	logf, err := os.OpenFile(o.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy
	p, err := child.Start(child.Spec{Name: "minio", Path: o.Binary, Args: []string{"server", "--address", o.Addr, "--quiet", o.Dir},
		Env: append(slices.Clip(o.Env), "MINIO_ROOT_USER="+o.User, "MINIO_ROOT_PASSWORD="+o.Password,
			"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=on"),
		Output: logf})
	if err != nil {
		return fmt.Errorf("minio: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	live := func(status int) bool { return status == http.StatusOK }
	if err := child.WaitHTTP(ctx, p, s.Endpoint+"/minio/health/live", live); err != nil {
		p.Kill()
		return fmt.Errorf("minio did not become live on %s: %v; its log:\n%s", o.Addr, err, s.logTail())
	}
	s.proc = p
	return nil
}

// logTail is the end of the server's log, for errors.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.opts.Log)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
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

// repoRoot is the nearest directory above the working directory whose
// go.mod is the hubproxy module's: the repository root, where .tools lives.
// The tool modules nested in it (soak, bench, deploy) have go.mod files of
// their own, and their tests share the root's MinIO.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && isProductModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("miniotest: no go.mod of github.com/hubproxy/hubproxy above the working directory")
		}
		dir = parent
	}
}

// isProductModule reports whether a go.mod declares the hubproxy module.
func isProductModule(gomod []byte) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == "github.com/hubproxy/hubproxy"
		}
	}
	return false
}
