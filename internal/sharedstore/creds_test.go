package sharedstore_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// noCredentials leaves the AWS SDK nothing to find credentials in: no
// variables, no profile, empty shared files.
func noCredentials(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"config", "credentials"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", dir)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"} {
		t.Setenv(v, "")
		os.Unsetenv(v) // t.Setenv restores it; the SDK must see it unset
	}
}

// syncBuffer is a log sink the SDK's goroutines may write to.
type syncBuffer = testutil.SyncBuffer

// No credentials anywhere, against an S3-compatible endpoint: one sentence
// saying what to set, not the SDK's chain of every provider it tried, and
// at once: the instance-metadata service is not asked for an endpoint that
// is not AWS's.
func TestNoCredentialsSaysWhatToSet(t *testing.T) {
	noCredentials(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // never reached: credentials come first
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = sharedstore.Open(ctx, "s3://bkt/p?endpoint=http://"+l.Addr().String()+"&use_path_style=true", sharedstore.Options{Logger: log})
	var ce *sharedstore.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Open: %v, want a ConfigError", err)
	}
	msg := err.Error()
	for _, want := range []string{"s3://bkt/p", "no AWS credentials", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "profile", "pod role"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	for _, chain := range []string{"operation error", "failed to refresh", "IMDS", "EC2"} {
		if strings.Contains(msg, chain) {
			t.Errorf("error %q carries the SDK's chain (%q)", msg, chain)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v: something waited on a service that is not there", d)
	}
	if !strings.Contains(logs.String(), "AWS credential retrieval failed") {
		t.Errorf("the SDK's reason is not logged at debug:\n%s", logs.String())
	}
}

// With AWS's own S3 the instance-metadata service is a credential source;
// the SDK's warnings about it ("falling back to IMDSv1") are records of the
// logger given, not lines of its own on stderr, and an instance without a
// role still ends in the same sentence.
func TestSDKWarningsGoToTheLogger(t *testing.T) {
	noCredentials(t)
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
			http.Error(w, "no IMDSv2 here", http.StatusForbidden) // the SDK falls back to v1, and warns
			return
		}
		http.NotFound(w, r) // no role
	}))
	defer imds.Close()
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := sharedstore.Open(ctx, "s3://bkt", sharedstore.Options{Logger: log, ReadOnly: true})
	var ce *sharedstore.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "no AWS credentials: set AWS_ACCESS_KEY_ID") {
		t.Fatalf("Open: %v, want the no-credentials ConfigError", err)
	}
	if got := logs.String(); !strings.Contains(got, "falling back to IMDSv1") || !strings.Contains(got, "component=aws-sdk") {
		t.Errorf("the SDK's warning did not reach the logger:\n%s", got)
	}
}
