package s3api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/apptest"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// The fake hub's repos and tokens the S3 tests read.
const (
	tokGranted = "hf_granted_token"
	tokDenied  = "hf_denied_token"
)

var (
	modelRepo = hub.MustRepo(hub.Model, "org/model")
	gatedRepo = hub.MustRepo(hub.Model, "org/gated")
	lfs       = func(b bool) *bool { return &b }
)

// modelFiles are nested folders, LFS and plain files, a name with a space
// and one with a non-ASCII letter: what a listing must reproduce.
func modelFiles() []hubtest.File {
	return []hubtest.File{
		{Path: "config.json", Data: []byte(`{"model_type":"llama"}`)},
		{Path: "z.txt", Data: []byte("last at the root")},
		{Path: "a/b/c.txt", Data: []byte("deep")},
		{Path: "a/b/d/e.txt", Data: []byte("deeper")},
		{Path: "a/x.bin", Data: hubtest.RandomBytes(1, 3000), LFS: lfs(true)},
		{Path: "weights/model-00001-of-00002.safetensors", Data: hubtest.RandomBytes(2, 700<<10)},
		{Path: "weights/model-00002-of-00002.safetensors", Data: hubtest.RandomBytes(3, 4<<20)},
		{Path: "with space/é.txt", Data: []byte("unicode")},
	}
}

// newEnv is a fake hub (tree pages of 3 entries, so every listing pages
// upstream) with org/model and the gated org/gated, which only tokGranted
// may read, and a hubproxy over it.
func newEnv(t *testing.T, tweak func(*app.Config)) *apptest.Env {
	t.Helper()
	e := apptest.New(t, hubtest.Options{PageSize: 3}, tweak)
	e.Hub.AddRepo(hubtest.RepoSpec{ID: modelRepo.ID(), Files: modelFiles()})
	e.Hub.AddRepo(hubtest.RepoSpec{ID: gatedRepo.ID(), Gated: true, ApprovedTokens: []string{tokGranted},
		Files: []hubtest.File{{Path: "model.safetensors", Data: hubtest.RandomBytes(4, 200<<10)}}})
	return e
}

// client is an aws-sdk-go-v2 S3 client of the proxy's S3 listener, path
// style; token "" is anonymous, else the token is the access key id. It
// makes one attempt, so that what a request cost is that request's.
func client(e *apptest.Env, token string) *s3.Client {
	o := s3.Options{
		BaseEndpoint:     aws.String(e.S3.URL),
		UsePathStyle:     true,
		Region:           "us-east-1",
		RetryMaxAttempts: 1,
		Credentials:      aws.AnonymousCredentials{},
	}
	if token != "" {
		o.Credentials = credentials.NewStaticCredentialsProvider(token, "any-secret", "")
	}
	return s3.New(o)
}

// s3Code is the S3 error code and HTTP status of an SDK error.
func s3Code(t *testing.T, err error) (string, int) {
	t.Helper()
	if err == nil {
		return "", 0
	}
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

// wantCode fails unless err is the S3 error code with status.
func wantCode(t *testing.T, what string, err error, code string, status int) {
	t.Helper()
	gotCode, gotStatus := s3Code(t, err)
	if gotCode != code || gotStatus != status {
		t.Errorf("%s: error %v (code %q, status %d); want %s, %d", what, err, gotCode, gotStatus, code, status)
	}
}

var ctx = context.Background()

// rawGet sends a plain request to the S3 listener, for what the SDKs hide
// (headers of errors, paths they would escape).
func rawDo(t *testing.T, e *apptest.Env, method, path string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, e.S3.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
