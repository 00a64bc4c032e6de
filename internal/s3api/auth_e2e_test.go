package s3api

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// objectServer is a stand-in for the S3 front door: it asks the
// Authenticator who each request is from, records it, and answers GETs of
// one object. Refusals are S3 XML errors, so the SDK reads their codes.
type objectServer struct {
	a    *Authenticator
	key  string // the object's path, decoded, as Go's server hands it over
	body string

	mu   sync.Mutex
	seen []string // "caller:" plus the caller's Authorization value, or the AuthError's code, per request
}

func (s *objectServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := s.a.Caller(r)
	var ae *AuthError
	s.mu.Lock()
	if errors.As(err, &ae) {
		s.seen = append(s.seen, ae.Code)
	} else {
		s.seen = append(s.seen, "caller:"+c.Auth())
	}
	s.mu.Unlock()
	if err != nil {
		status := http.StatusInternalServerError
		body := errorBody{Code: "InternalError", Message: "internal error", RequestID: "req"}
		if ae != nil {
			status, body.Code, body.Message = ae.Status, ae.Code, ae.Message
		}
		out, _ := xml.Marshal(body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		_, _ = w.Write(out)
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != s.key {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusTeapot)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(s.body)))
	w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
	w.Header().Set("Last-Modified", "Thu, 03 Dec 2026 06:00:00 GMT")
	_, _ = io.WriteString(w, s.body)
}

func (s *objectServer) takeSeen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.seen
	s.seen = nil
	return out
}

func s3Client(url, key, secret string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(url),
		UsePathStyle: true,
		Region:       testRegion,
		Credentials:  credentials.NewStaticCredentialsProvider(key, secret, ""),
		Retryer:      aws.NopRetryer{}, // one request per call, to count them
	})
}

// A real aws-sdk-go-v2 S3 client, with static credentials from the
// credentials file, reads an object whose key needs every kind of
// encoding; the server sees the token the file maps its key to.
func TestS3ClientEndToEnd(t *testing.T) {
	file := writeFile(t, testKey+" "+testSecret+" "+testToken+"\n", 0o600)
	a, err := NewAuthenticator(AuthOptions{CredentialsFile: file})
	if err != nil {
		t.Fatal(err)
	}
	const key = "org/m@refs%2Fpr%2F1/dir/with space+é@x~(1).safetensors"
	srv := &objectServer{a: a, key: "/models/" + key, body: "the object's bytes"}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx := context.Background()
	get := func(c *s3.Client) (string, error) {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String(key)})
		if err != nil {
			return "", err
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		return string(b), err
	}

	body, err := get(s3Client(hs.URL, testKey, testSecret))
	if err != nil || body != srv.body {
		t.Fatalf("GetObject: %q, %v", body, err)
	}
	if seen := srv.takeSeen(); len(seen) != 1 || seen[0] != "caller:Bearer "+testToken {
		t.Fatalf("server saw %q, want one request from the mapped token", seen)
	}

	// The same key with another secret is refused, and the SDK reads why.
	_, err = get(s3Client(hs.URL, testKey, "not-"+testSecret))
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v", err)
	}
	if seen := srv.takeSeen(); len(seen) != 1 || seen[0] != "SignatureDoesNotMatch" {
		t.Fatalf("server saw %q", seen)
	}

	// A Hub token as the access key id, with any secret.
	body, err = get(s3Client(hs.URL, "hf_clientToken0123", "any secret"))
	if err != nil || body != srv.body {
		t.Fatalf("hf_ key: %q, %v", body, err)
	}
	if seen := srv.takeSeen(); len(seen) != 1 || seen[0] != "caller:Bearer hf_clientToken0123" {
		t.Fatalf("server saw %q", seen)
	}

	// A URL presigned by the SDK's presign client, fetched by plain HTTP.
	ps, err := s3.NewPresignClient(s3Client(hs.URL, testKey, testSecret)).PresignGetObject(ctx,
		&s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String(key)}, s3.WithPresignExpires(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(ps.Method, ps.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range ps.SignedHeader {
		if k != "Host" {
			req.Header[k] = vs
		}
	}
	code, got := send(t, req)
	if code != 200 || got != srv.body {
		t.Fatalf("presigned GET: %d %q", code, got)
	}
	if seen := srv.takeSeen(); len(seen) != 1 || seen[0] != "caller:Bearer "+testToken {
		t.Fatalf("server saw %q", seen)
	}
}
