package app_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/apptest"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// authRecorder is the proxy's upstream transport, recording the
// Authorization of every request hubproxy sends upstream.
type authRecorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (a *authRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Header.Get("Authorization"))
	a.mu.Unlock()
	return a.base.RoundTrip(r)
}

func (a *authRecorder) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.seen
	a.seen = nil
	return s
}

// s3Err is the S3 code and HTTP status of an aws-sdk-go-v2 error.
func s3Err(err error) (string, int) {
	var ae smithy.APIError
	var re *awshttp.ResponseError
	code, status := "", 0
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

// An S3 key of the s3-credentials-file, signed by aws-sdk-go-v2 as any S3
// client signs, is served as the Hub token it maps to: admission
// (client-tokens-file) admits that token and the Hub grants its gated
// repo, and upstream sees only "Bearer <token>", never the SigV4 header or
// the key's secret. A wrong secret is SignatureDoesNotMatch, and a key
// mapped to the anonymous caller is refused by admission; neither reaches
// upstream.
func TestS3CredentialsFile(t *testing.T) {
	const (
		granted = "hf_granted_token"
		keyID   = "AKIATEAMREADER"
		secret  = "s3cr3t/team+reader"
		anonKey = "AKIAANONYMOUS"
	)
	dir := t.TempDir()
	creds := filepath.Join(dir, "s3-credentials")
	if err := os.WriteFile(creds, []byte("# team keys\n"+keyID+" "+secret+" "+granted+"\n"+anonKey+"\tanon-secret\t-\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(granted+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := &authRecorder{base: fetch.DefaultTransport()}
	e := apptest.New(t, hubtest.Options{}, func(c *app.Config) {
		c.S3CredentialsFile = creds
		c.ClientTokensFile = tokens
		c.Transport = rec
	})
	weights := hubtest.RandomBytes(7, 300<<10)
	e.Hub.AddRepo(hubtest.RepoSpec{ID: "org/gated", Gated: true, ApprovedTokens: []string{granted},
		Files: []hubtest.File{{Path: "model.safetensors", Data: weights}}})
	e.Hub.ResetCounters()
	ctx := context.Background()
	client := func(key, secret string) *s3.Client {
		return s3.New(s3.Options{BaseEndpoint: aws.String(e.S3.URL), UsePathStyle: true, Region: "us-east-1",
			RetryMaxAttempts: 1, Credentials: credentials.NewStaticCredentialsProvider(key, secret, "")})
	}
	get := &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/gated/model.safetensors")}

	// Refusals first, so that nothing is cached that could serve them.
	for _, c := range []struct {
		name, key, secret, code string
	}{
		{"wrong secret", keyID, secret + "x", "SignatureDoesNotMatch"},
		{"another key's secret", keyID, "anon-secret", "SignatureDoesNotMatch"},
		{"key mapped to anonymous", anonKey, "anon-secret", "AccessDenied"},
	} {
		_, err := client(c.key, c.secret).GetObject(ctx, get)
		if code, status := s3Err(err); code != c.code || status != http.StatusForbidden {
			t.Errorf("%s: %v (code %q, status %d); want %s, 403", c.name, err, code, status, c.code)
		}
	}
	if n := e.Hub.Counters().Requests; n != 0 {
		t.Fatalf("refused requests went upstream %d times: %v", n, e.Hub.Requests())
	}
	if seen := rec.take(); len(seen) != 0 {
		t.Fatalf("refused requests went upstream: %q", seen)
	}

	// The right secret: the mapped token's access, listed, headed and read.
	c := client(keyID, secret)
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String("org/gated/")})
	if err != nil || len(list.Contents) != 1 || aws.ToString(list.Contents[0].Key) != "org/gated/model.safetensors" ||
		aws.ToInt64(list.Contents[0].Size) != int64(len(weights)) {
		t.Fatalf("listing as the mapped token: %v, %+v", err, list)
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: get.Bucket, Key: get.Key})
	if err != nil || aws.ToInt64(head.ContentLength) != int64(len(weights)) {
		t.Fatalf("head as the mapped token: %v, %+v", err, head)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: get.Bucket, Key: get.Key, Range: aws.String("bytes=1000-200999")})
	if err != nil {
		t.Fatalf("ranged get as the mapped token: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, weights[1000:201000]) {
		t.Fatalf("ranged get: %d bytes, %v; want the file's bytes 1000-200999", len(got), err)
	}

	// A presigned URL of the key, fetched by a plain HTTP client.
	ps, err := s3.NewPresignClient(c).PresignGetObject(ctx, get, s3.WithPresignExpires(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(ps.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, weights) {
		t.Fatalf("presigned GET: %d, %d bytes", resp.StatusCode, len(got))
	}
	// The same URL with its signature changed is refused.
	u, err := url.Parse(ps.URL)
	if err != nil {
		t.Fatal(err)
	}
	sig := u.Query().Get("X-Amz-Signature")
	if len(sig) != 64 {
		t.Fatalf("presigned URL %s has no signature", ps.URL)
	}
	bad := strings.Replace(ps.URL, sig, strings.Repeat("0", 64), 1)
	resp, err = http.Get(bad)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !bytes.Contains(body, []byte("<Code>SignatureDoesNotMatch</Code>")) {
		t.Errorf("tampered presigned GET: %d %s", resp.StatusCode, body)
	}

	seen := rec.take()
	if len(seen) == 0 {
		t.Fatal("the mapped token's reads never went upstream")
	}
	for _, a := range seen {
		// Redirected CDN fetches carry no credentials at all.
		if a != "" && a != "Bearer "+granted {
			t.Errorf("upstream saw Authorization %q; want only Bearer %s", a, granted)
		}
	}
	if !slices.Contains(seen, "Bearer "+granted) {
		t.Errorf("upstream never saw the mapped token: %q", seen)
	}
}

// A credentials file others may read, or a malformed one, fails the start
// with the key's name, rather than a first S3 request.
func TestS3CredentialsFileRefused(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		body string
		mode os.FileMode
		want string
	}{
		"readable by others": {"AKIATEAM secret hf_tok\n", 0o644, "chmod"},
		"two words":          {"AKIATEAM secret\n", 0o600, ":1:"},
		"missing":            {"", 0, "no such file"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if c.mode != 0 {
			if err := os.WriteFile(p, []byte(c.body), c.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, c.mode); err != nil { // past the umask
				t.Fatal(err)
			}
		}
		cfg := app.Config{Upstream: "http://127.0.0.1:1", CacheDir: t.TempDir(), S3CredentialsFile: p}
		h, err := app.Build(cfg, nil)
		if err == nil {
			h.Close()
			t.Errorf("%s: built", name)
			continue
		}
		if !strings.Contains(err.Error(), "s3-credentials-file") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want s3-credentials-file and %q", name, err, c.want)
		}
	}
}
