package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The shared store's credentials, bucket and the prefix the proxies share
// chunks under. MinIO takes any root credentials it is started with.
const (
	storeUser   = "hubproxysoak"
	storeSecret = "hubproxysoak-secret"
	storeBucket = "hubproxy"
	storePrefix = "soak"
)

// objectStore is the real MinIO server the proxies share chunks through,
// one process on a data directory that outlives it: the chaos kills it with
// SIGKILL and starts it again on the same directory and port. The proxies
// reach it through a relay, so an outage makes it unreachable without
// touching it; the driver's own client (for tampering and the post-run
// scan) goes to it directly.
type objectStore struct {
	bin, dir, addr, logPath string
	relay                   *relay
	client                  *s3.Client

	chaosMu  sync.Mutex // one restart at a time
	outageMu sync.Mutex // one outage at a time

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd is reaped
}

// startStore starts MinIO on a fresh directory under workDir, creates the
// bucket and puts a relay in front of it.
func startStore(bin, workDir string) (*objectStore, error) {
	if bin == "" {
		return nil, errors.New("soak: the MinIO binary is required (-minio, or HUBPROXY_MINIO; `make minio` builds it, and `make soak` does that first); -no-store runs without the shared store")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("soak: MinIO: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	st := &objectStore{bin: bin, dir: filepath.Join(workDir, "minio"), addr: addr, logPath: filepath.Join(workDir, "minio.log")}
	if err := st.start(); err != nil {
		return nil, err
	}
	st.client = s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://" + addr),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(storeUser, storeSecret, ""),
		// Checksums as hubproxy asks for them: only where the API needs them.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(storeBucket)}); err != nil {
		st.stop()
		return nil, fmt.Errorf("soak: creating the store's bucket: %w", err)
	}
	if st.relay, err = newRelay("store", addr, nil); err != nil {
		st.stop()
		return nil, err
	}
	return st, nil
}

// URL is the shared-store URL the proxies use: through the relay.
func (st *objectStore) URL() string {
	return "s3://" + storeBucket + "/" + storePrefix + "?endpoint=" + st.relay.URL() + "&region=us-east-1&use_path_style=true"
}

// env is what a hubproxy process needs to reach the store: the standard
// AWS variables, as a deployed node gets them.
func (st *objectStore) env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + storeUser, "AWS_SECRET_ACCESS_KEY=" + storeSecret,
		"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
		"HUBPROXY_SHARED_STORE_SECRET=" + chunkSecret}
}

// start runs MinIO and waits until it is live. The process is started from
// a thread locked for its lifetime, so the parent-death signal (which fires
// when that thread ends) takes MinIO down with a driver that dies.
func (st *objectStore) start() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(st.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	started := make(chan error, 1)
	done := make(chan struct{})
	var cmd *exec.Cmd
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the child
		defer close(done)
		defer logf.Close()
		cmd = exec.Command(st.bin, "server", "--address", st.addr, "--quiet", st.dir)
		cmd.Env = append(cleanEnv(), "MINIO_ROOT_USER="+storeUser, "MINIO_ROOT_PASSWORD="+storeSecret,
			"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=on")
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("soak: starting MinIO: %w", err)
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := c.Get("http://" + st.addr + "/minio/health/live")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				st.cmd, st.done = cmd, done
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("soak: MinIO exited before it served; see %s", st.logPath)
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("soak: MinIO did not become live on %s within 60s; see %s", st.addr, st.logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop kills MinIO with SIGKILL, as a crash would, and reaps it.
func (st *objectStore) stop() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cmd == nil {
		return false
	}
	_ = st.cmd.Process.Kill()
	<-st.done
	st.cmd, st.done = nil, nil
	return true
}

// Name, Kill and Restart make the store restartable (chaos.go).
func (st *objectStore) Name() string { return "store" }

func (st *objectStore) Kill() error {
	if !st.stop() {
		return errors.New("soak: the store was not running")
	}
	return nil
}

func (st *objectStore) Restart() error { return st.start() }

// close stops the store and its relay.
func (st *objectStore) close() {
	if st.relay != nil {
		st.relay.close()
	}
	st.stop()
}
