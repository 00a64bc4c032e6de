package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
)

// minio is the cluster scenario's S3 server: the MinIO binary the
// shared-store tests run (miniotest.Version, built by `make minio`), as a
// child of the harness like the proxies, on a loopback port, with one
// bucket. Every restart starts it on an empty data directory, so each
// repetition begins with a cold store.
type minio struct {
	bin     string
	procs   *procs
	workDir string

	// Set by restart; used from the run's goroutine only.
	n        int
	p        *proc
	dir      string
	endpoint string // http://127.0.0.1:PORT
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
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := append(childEnv(), "MINIO_ROOT_USER="+miniotest.AccessKey, "MINIO_ROOT_PASSWORD="+miniotest.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=on")
	p, err := m.procs.start("minio", m.bin, []string{"server", "--address", addr, "--quiet", filepath.Join(m.dir, "data")},
		env, m.dir+".log", syscall.SIGKILL)
	if err != nil {
		return err
	}
	m.p, m.endpoint = p, "http://"+addr
	return m.createBucket(ctx)
}

// createBucket waits for the server to be live and creates the bucket,
// retrying while MinIO finishes starting (it answers its health check a
// little before it takes requests).
func (m *minio) createBucket(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(m.endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(miniotest.AccessKey, miniotest.SecretKey, ""),
		HTTPClient:   &http.Client{Transport: &http.Transport{Proxy: nil}},
	})
	for {
		_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(miniotest.Bucket)})
		if err == nil {
			return nil
		}
		select {
		case <-m.p.done:
			return fmt.Errorf("%w: minio (%v); log: %s", ErrExited, m.p.err, logTail(m.p.logPath))
		case <-ctx.Done():
			return fmt.Errorf("harness: minio at %s: creating bucket %s: %v; log: %s", m.endpoint, miniotest.Bucket, err, logTail(m.p.logPath))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// url is the shared-store URL of prefix in the bucket, as a node takes it.
func (m *minio) url(prefix string) string {
	return "s3://" + miniotest.Bucket + "/" + prefix + "?endpoint=" + m.endpoint + "&region=us-east-1&use_path_style=true"
}

// nodeEnv is what a hubproxy node needs to reach the server: its keys, as a
// deployed node takes them from the standard AWS variables.
func (m *minio) nodeEnv() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + miniotest.AccessKey, "AWS_SECRET_ACCESS_KEY=" + miniotest.SecretKey,
		"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true"}
}

// stop ends the server and removes its data, which holds a copy of the file.
func (m *minio) stop() {
	if m.p == nil {
		return
	}
	m.procs.stop(m.p, 5*time.Second)
	m.p = nil
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

// moduleRoot is dir, or when it is "" the root of the module the working
// directory is in.
func moduleRoot(ctx context.Context, dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	o, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(o))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", errors.Join(errors.New("harness: cannot find the hubproxy module from the working directory (go env GOMOD)"), err)
	}
	return filepath.Dir(gomod), nil
}
