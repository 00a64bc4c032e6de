package s3api_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/apptest"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// cacheFiles lists every file under the cache directory.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Bad input gets the S3 error S3 would give, asks nothing upstream,
// writes nothing to the cache, and the server goes on serving.
func TestS3BadInput(t *testing.T) {
	e := newEnv(t, nil)
	before := cacheFiles(t, e.Dir)
	e.Hub.ResetCounters()
	for _, c := range []struct {
		method, path string
		hdr          []string
		code         string
		status       int
	}{
		{"GET", "/spaces/org/model/config.json", nil, "NoSuchBucket", 404},
		{"GET", "/spaces?list-type=2&prefix=org/model/", nil, "NoSuchBucket", 404},
		{"HEAD", "/Models", nil, "", 404},
		{"GET", "/models/org/model/../gated/model.safetensors", nil, "InvalidArgument", 400},
		{"GET", "/models/org/model/a/./b/c.txt", nil, "InvalidArgument", 400},
		{"GET", "/models/org/model/a//b/c.txt", nil, "InvalidArgument", 400},
		{"GET", "/models/org", nil, "InvalidArgument", 400},
		{"GET", "/models/org/model/", nil, "InvalidArgument", 400},
		{"GET", "/models/org/model@/config.json", nil, "InvalidArgument", 400},
		{"GET", "/models/org/model@..%252Fx/config.json", nil, "InvalidArgument", 400},
		{"GET", "/models?list-type=2&prefix=", nil, "InvalidArgument", 400},
		{"GET", "/models?list-type=2&prefix=org/", nil, "InvalidArgument", 400},
		{"GET", "/models?list-type=2&prefix=org/model/../x/", nil, "InvalidArgument", 400},
		{"GET", "/models?list-type=2&prefix=org/model/&max-keys=-1", nil, "InvalidArgument", 400},
		{"GET", "/models?list-type=2&prefix=org/model/&max-keys=many", nil, "InvalidArgument", 400},
		{"GET", "/models?list-type=2&prefix=org/model/&continuation-token=bm90LWEtdG9rZW4", nil, "InvalidArgument", 400},
		{"GET", "/models?list-type=3&prefix=org/model/", nil, "InvalidArgument", 400},
		{"GET", "/models?list-type=2&prefix=org/model/&encoding-type=base64", nil, "InvalidArgument", 400},
		{"PUT", "/models/org/model/new.bin", nil, "NotImplemented", 501},
		{"DELETE", "/models/org/model/config.json", nil, "NotImplemented", 501},
		{"POST", "/models?delete", nil, "NotImplemented", 501},
		{"PUT", "/models", nil, "NotImplemented", 501},
		{"GET", "/models/org/model/config.json?acl", nil, "NotImplemented", 501},
		{"GET", "/models?versioning", nil, "NotImplemented", 501},
		{"GET", "/models?uploads", nil, "NotImplemented", 501},
		{"OPTIONS", "/models/org/model/config.json", nil, "MethodNotAllowed", 405},
		{"GET", "/models/org/model/config.json", []string{"Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20250101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00"}, "AuthorizationHeaderMalformed", 400}, // no X-Amz-Date
		{"GET", "/models/org/model/config.json?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20250101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=00", nil, "AuthorizationQueryParametersError", 400},
		{"GET", "/models/org/model/config.json", []string{"Authorization", "AWS AKIAIOSFODNN7EXAMPLE:c2ln"}, "InvalidRequest", 400},
		{"GET", "/models/org/model/config.json", []string{"Authorization", "AWS4-HMAC-SHA256 SignedHeaders=host, Signature=00"}, "AuthorizationHeaderMalformed", 400},
		{"GET", "/models/org/model/config.json", []string{"Authorization", "AWS4-HMAC-SHA256 Credential=hf_x, Signature=00"}, "AuthorizationHeaderMalformed", 400},
	} {
		resp := rawDo(t, e, c.method, c.path, c.hdr...)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var doc struct {
			Code, Message, RequestId string
		}
		if c.method != "HEAD" {
			if err := xml.Unmarshal(body, &doc); err != nil {
				t.Errorf("%s %s: body %q is not an S3 error: %v", c.method, c.path, body, err)
			}
		}
		if resp.StatusCode != c.status || doc.Code != c.code || (c.method != "HEAD" && doc.RequestId == "") {
			t.Errorf("%s %s: %d %+v; want %d %s", c.method, c.path, resp.StatusCode, doc, c.status, c.code)
		}
		if resp.Header.Get("x-amz-request-id") == "" {
			t.Errorf("%s %s: no x-amz-request-id", c.method, c.path)
		}
	}
	if n := e.Hub.Counters().Requests; n != 0 {
		t.Errorf("bad input made %d upstream requests: %v", n, e.Hub.Requests())
	}
	if after := cacheFiles(t, e.Dir); !slices.Equal(before, after) {
		t.Errorf("bad input changed the cache: %q → %q", before, after)
	}
	// Writes through the SDK are refused alike.
	c := client(e, tokGranted)
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/new.bin"), Body: strings.NewReader("x")})
	wantCode(t, "PutObject", err, "NotImplemented", http.StatusNotImplemented)
	_, err = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/config.json")})
	wantCode(t, "DeleteObject", err, "NotImplemented", http.StatusNotImplemented)
	_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("spaces")})
	wantCode(t, "CreateBucket", err, "NotImplemented", http.StatusNotImplemented)
	// A well-signed request of a key this hubproxy does not know.
	unknown := s3.New(s3.Options{BaseEndpoint: aws.String(e.S3.URL), UsePathStyle: true, Region: "us-east-1", RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "")})
	_, err = unknown.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/config.json")})
	wantCode(t, "unknown access key", err, "InvalidAccessKeyId", http.StatusForbidden)
	// A huge max-keys is capped, as S3 caps it.
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String("org/model/"), MaxKeys: aws.Int32(1 << 30)})
	if err != nil || aws.ToInt32(out.MaxKeys) != 1000 || len(out.Contents) != len(modelFiles()) {
		t.Errorf("huge max-keys: %v, %+v", err, out)
	}
	// A missing object is NoSuchKey, and the server still serves.
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/missing.txt")})
	wantCode(t, "missing key", err, "NoSuchKey", http.StatusNotFound)
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/config.json")}); err != nil {
		t.Errorf("after bad input: %v", err)
	}
}

// A cold ranged GET fetches about its bytes upstream (the cache rounds to
// its blocks), and the same range warm fetches nothing.
func TestS3ColdRangeCost(t *testing.T) {
	e := newEnv(t, nil)
	c := client(e, "")
	path := "weights/model-00002-of-00002.safetensors"
	const off, n = 1_500_000, 100_000
	e.Hub.ResetCounters()
	for pass := range 2 {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/" + path),
			Range: aws.String("bytes=1500000-1599999")})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(body, fileData(t, path)[off:off+n]) {
			t.Fatalf("pass %d: wrong bytes", pass)
		}
		got := e.Hub.Counters().BodyBytes
		t.Logf("pass %d: %d bytes upstream for a %d-byte range", pass, got, n)
		if pass == 0 && (got < n || got > n+2*apptest.BlockSize) {
			t.Errorf("cold range of %d bytes cost %d upstream; want at most %d", n, got, n+2*apptest.BlockSize)
		}
		if pass == 1 && got != 0 {
			t.Errorf("warm range cost %d bytes upstream", got)
		}
		e.Hub.ResetCounters()
	}
}

// client-tokens-file and deny-repos hold S3 callers as they hold the hub
// routes': a caller without a listed token, or a denied repo, is
// AccessDenied before anything goes upstream.
func TestS3Admission(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(tokGranted+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *app.Config) {
		c.ClientTokensFile = tokens
		c.DenyRepos = []string{"org/gated"}
	})
	e.Hub.ResetCounters()
	for _, tok := range []string{"", tokDenied} {
		_, err := client(e, tok).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/config.json")})
		wantCode(t, "unlisted token "+tok, err, "AccessDenied", http.StatusForbidden)
		_, err = client(e, tok).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String("org/model/")})
		wantCode(t, "unlisted token listing "+tok, err, "AccessDenied", http.StatusForbidden)
	}
	c := client(e, tokGranted)
	_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/gated/model.safetensors")})
	wantCode(t, "denied repo", err, "AccessDenied", http.StatusForbidden)
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String("org/gated/")})
	wantCode(t, "denied repo listing", err, "AccessDenied", http.StatusForbidden)
	if n := e.Hub.Counters().Requests; n != 0 {
		t.Errorf("refused requests went upstream %d times", n)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/config.json")})
	if err != nil {
		t.Fatalf("listed token: %v", err)
	}
	out.Body.Close()
}

// Keys name revisions after '@': a branch, a commit, and a PR ref
// percent-encoded; a listing at a revision lists keys spelled as its
// prefix is, pinned to the commit it resolved to.
func TestS3Revisions(t *testing.T) {
	var skew atomic.Int64 // how far the proxy's clock is ahead
	e := newEnv(t, func(c *app.Config) { c.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) } })
	fi, _ := e.Hub.Stat(modelRepo, "main", "config.json")
	e.Hub.SetRef(modelRepo, "refs/pr/1", fi.Commit)
	c := client(e, "")
	for _, rev := range []string{"main", fi.Commit, "refs%2Fpr%2F1"} {
		key := "org/model@" + rev + "/config.json"
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		body, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(body, fileData(t, "config.json")) {
			t.Errorf("%s: %q", key, body)
		}
		objs, _, _ := listAll(t, c, "org/model@"+rev+"/", "", 3)
		if len(objs) != len(modelFiles()) || aws.ToString(objs[0].Key) != "org/model@"+rev+"/a/b/c.txt" {
			t.Errorf("listing at %s: %d objects, first %s", rev, len(objs), aws.ToString(objs[0].Key))
		}
	}
	// A branch that moves mid-listing: the continuation token keeps the
	// listing on the commit it started at.
	first, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String("org/model/"), MaxKeys: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	e.Hub.Commit(modelRepo, "main", []hubtest.File{{Path: "a/a.txt", Data: []byte("new")}})
	skew.Store(int64(2 * time.Minute)) // past revision-ttl: main is asked again, and is the new commit
	if objs, _, _ := listAll(t, c, "org/model/", "", 1000); len(objs) != 1 {
		t.Fatalf("a fresh listing of the moved branch has %d objects; want the new commit's 1", len(objs))
	}
	var rest []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String("org/model/"), MaxKeys: aws.Int32(2), ContinuationToken: first.NextContinuationToken})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			rest = append(rest, aws.ToString(o.Key))
		}
	}
	if len(first.Contents)+len(rest) != len(modelFiles()) {
		t.Errorf("listing across a moved branch: %d + %q", len(first.Contents), rest)
	}
}

// ListBuckets names the two buckets; HeadBucket and GetBucketLocation
// answer for them and NoSuchBucket for any other.
func TestS3Buckets(t *testing.T) {
	e := newEnv(t, nil)
	c := client(e, "")
	out, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	if !slices.Equal(names, []string{"datasets", "models"}) {
		t.Errorf("buckets %q", names)
	}
	for _, b := range []string{"models", "datasets"} {
		if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Errorf("HeadBucket %s: %v", b, err)
		}
		loc, err := c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String(b)})
		if err != nil || loc.LocationConstraint != "" {
			t.Errorf("GetBucketLocation %s: %v %q", b, err, loc.LocationConstraint)
		}
	}
	// The datasets bucket serves dataset repos, not the model of that name.
	parquet := hubtest.RandomBytes(9, 5000)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Dataset, ID: "org/model", Files: []hubtest.File{{Path: "train/part-0.parquet", Data: parquet}}})
	objs, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("datasets"), Prefix: aws.String("org/model/")})
	if err != nil || len(objs.Contents) != 1 || aws.ToString(objs.Contents[0].Key) != "org/model/train/part-0.parquet" {
		t.Fatalf("datasets listing: %v %+v", err, objs)
	}
	get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("datasets"), Key: objs.Contents[0].Key})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if !bytes.Equal(body, parquet) {
		t.Errorf("datasets object: %d bytes", len(body))
	}
	_, err = c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("spaces")})
	if _, status := s3Code(t, err); status != http.StatusNotFound {
		t.Errorf("HeadBucket spaces: %v", err)
	}
	_, err = c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String("spaces")})
	wantCode(t, "GetBucketLocation spaces", err, "NoSuchBucket", http.StatusNotFound)
}

// The Hub's outage is ServiceUnavailable (503, which SDKs retry) for
// reads, HEADs and listings alike, and the S3 API serves again once the
// Hub is back.
func TestS3UpstreamOutage(t *testing.T) {
	e := newEnv(t, func(c *app.Config) { c.UpstreamCooldown = time.Millisecond })
	c := client(e, "")
	e.Hub.SetFaults(hubtest.Faults{Status5xx: hubtest.Fault{N: 1 << 20}})
	_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/config.json")})
	wantCode(t, "GetObject", err, "ServiceUnavailable", http.StatusServiceUnavailable)
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/z.txt")})
	if _, status := s3Code(t, err); status != http.StatusServiceUnavailable {
		t.Errorf("HeadObject: %v", err)
	}
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String("org/model/")})
	wantCode(t, "ListObjectsV2", err, "ServiceUnavailable", http.StatusServiceUnavailable)
	e.Hub.SetFaults(hubtest.Faults{})
	testutil.Eventually(t, 10*time.Second, "the S3 API serving again", func() bool {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/config.json")})
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(out.Body)
		out.Body.Close()
		return bytes.Equal(body, fileData(t, "config.json"))
	})
}

// Content that does not match its hash never reaches the client as a
// complete object: the transfer fails, and the next read, the Hub sending
// good bytes again, is correct.
func TestS3CorruptUpstream(t *testing.T) {
	e := newEnv(t, nil)
	c := client(e, "")
	path := "weights/model-00001-of-00002.safetensors"
	e.Hub.SetFaults(hubtest.Faults{CorruptBytes: hubtest.Fault{N: 1 << 20}, CorruptPath: path})
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/" + path)})
	if err == nil {
		body, rerr := io.ReadAll(out.Body)
		out.Body.Close()
		if rerr == nil && bytes.Equal(body, fileData(t, path)) {
			t.Fatal("corrupt upstream bytes were served as the object, yet match it: the fault did not fire")
		}
		if rerr == nil {
			t.Fatalf("a corrupt object was served whole (%d bytes) without an error", len(body))
		}
	} else if code, _ := s3Code(t, err); code != "InternalError" {
		t.Errorf("corrupt upstream: %v; want InternalError or a failed transfer", err)
	}
	e.Hub.SetFaults(hubtest.Faults{})
	out, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/" + path)})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(body, fileData(t, path)) {
		t.Errorf("after the fault: %d bytes, %v", len(body), err)
	}
}

// Run:ai streamer's pattern: 16 connections reading a cold shard in
// concurrent ranges. Every byte is right and upstream sends each once.
func TestS3ConcurrentColdRanges(t *testing.T) {
	e := newEnv(t, nil)
	c := client(e, "")
	path := "weights/model-00002-of-00002.safetensors"
	data := fileData(t, path)
	const part = 256 << 10
	e.Hub.ResetCounters()
	var wg sync.WaitGroup
	errs := make(chan error, len(data)/part+1)
	for off := 0; off < len(data); off += part {
		wg.Add(1)
		go func(off int) {
			defer wg.Done()
			end := min(off+part, len(data))
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("org/model/" + path),
				Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, end-1))})
			if err != nil {
				errs <- err
				return
			}
			body, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil || !bytes.Equal(body, data[off:end]) {
				errs <- fmt.Errorf("range at %d: %d bytes, %v", off, len(body), err)
			}
		}(off)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := e.Hub.Counters().BytesByPath[modelRepo.String()+"/"+path]; got != int64(len(data)) {
		t.Errorf("upstream sent %d bytes of a %d-byte file read once in ranges", got, len(data))
	}
}
