package soak

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
)

// The shared store's credentials, bucket and the prefix the proxies share
// chunks under. MinIO takes any root credentials it is started with.
const (
	storeUser   = "hubproxysoak"
	storeSecret = "hubproxysoak-secret"
	storeBucket = miniotest.Bucket
	storePrefix = "soak"
)

// objectStore is the real MinIO server the proxies share chunks through,
// one process on a data directory that outlives it: the chaos kills it with
// SIGKILL and starts it again on the same directory and port. It runs as
// the tests run it (miniotest.Launch). The proxies reach it through a
// relay, so an outage makes it unreachable without touching it; the
// driver's own client (for tampering and the post-run scan) goes to it
// directly.
type objectStore struct {
	dir    string // its data directory
	srv    *miniotest.Server
	relay  *relay
	client *s3.Client

	chaosMu  sync.Mutex // one restart at a time
	outageMu sync.Mutex // one outage at a time
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
	st := &objectStore{dir: filepath.Join(workDir, "minio")}
	srv, err := miniotest.Launch(miniotest.Options{Binary: bin, Dir: st.dir, Log: filepath.Join(workDir, "minio.log"),
		User: storeUser, Password: storeSecret, Env: cleanEnv()})
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	st.srv = srv
	st.client = s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(storeUser, storeSecret, ""),
		// Checksums as hubproxy asks for them: only where the API needs them.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	if st.relay, err = newRelay("store", strings.TrimPrefix(srv.Endpoint, "http://"), nil); err != nil {
		srv.Kill()
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
	return append(st.srv.Env(), "HUBPROXY_SHARED_STORE_SECRET="+chunkSecret)
}

// Name, Kill and Restart make the store restartable (chaos.go).
func (st *objectStore) Name() string { return "store" }

func (st *objectStore) Kill() error {
	if !st.srv.Kill() {
		return errors.New("soak: the store was not running")
	}
	return nil
}

func (st *objectStore) Restart() error {
	if err := st.srv.Relaunch(); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	return nil
}

// close stops the store and its relay.
func (st *objectStore) close() {
	if st.relay != nil {
		st.relay.close()
	}
	st.srv.Kill()
}
