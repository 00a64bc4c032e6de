package s3api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	testKey        = "AKIDHUBPROXYTEST01"
	testSecret     = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	testToken      = "hf_mappedTokenOfTheCredentialsFile"
	testAnonKey    = "AKIDHUBPROXYANON01"
	testAnonSecret = "anonymous-key-secret-0123456789"
	testRegion     = "us-east-1"
)

// signTime is when the tests' requests are signed; the Authenticator's
// clock is set relative to it.
var signTime = time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)

// writeFile writes content to a file of mode perm in a test directory.
func writeFile(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "s3-credentials")
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, perm); err != nil { // WriteFile's mode is masked by the umask
		t.Fatal(err)
	}
	return name
}

// newTestAuth is an Authenticator over a credentials file with testKey
// (mapped to testToken) and testAnonKey (anonymous), its clock at now.
func newTestAuth(t *testing.T, now time.Time) *Authenticator {
	t.Helper()
	file := writeFile(t, "# test keys\n"+
		testKey+" "+testSecret+" "+testToken+"\n\n"+
		testAnonKey+"\t"+testAnonSecret+"\t-\n", 0o600)
	a, err := NewAuthenticator(AuthOptions{CredentialsFile: file, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// authServer answers each request with who it is from: 200 and
// "caller:" plus the caller's Authorization value, or the AuthError's
// status and code. Requests go over a real connection, so Go's server
// parses the path, query and Host as it will in production.
func authServer(t *testing.T, a *Authenticator) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := a.Caller(r)
		var ae *AuthError
		switch {
		case errors.As(err, &ae):
			w.WriteHeader(ae.Status)
			_, _ = io.WriteString(w, ae.Code)
		case err != nil:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "untyped error: "+err.Error())
		default:
			_, _ = io.WriteString(w, "caller:"+c.Auth())
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// send makes req and returns its status and body.
func send(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// newRequest is a GET of base+rawPath?rawQuery with the path on the wire
// exactly as rawPath writes it.
func newRequest(t *testing.T, base, rawPath, rawQuery string) *http.Request {
	t.Helper()
	u, err := url.Parse(base + rawPath)
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = rawQuery
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// s3Signer signs as the S3 client does: the path is already URI-encoded
// once, and is signed as it is sent. It is new for every request: a signer
// caches derived keys by access key id alone, so one shared signer would
// sign a "wrong secret" case with the right secret's key.
func s3Signer() *v4.Signer {
	return v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
}

func signHeader(t *testing.T, req *http.Request, key, secret, payload string, at time.Time) {
	t.Helper()
	req.Header.Set("X-Amz-Content-Sha256", payload)
	err := s3Signer().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}, req, payload, "s3", testRegion, at)
	if err != nil {
		t.Fatal(err)
	}
}

// presign turns req into its presigned URL, valid for expires, and returns
// the request that uses it.
func presign(t *testing.T, req *http.Request, key, secret string, at time.Time, expires time.Duration) *http.Request {
	t.Helper()
	q := req.URL.Query()
	q.Set("X-Amz-Expires", strconv.FormatInt(int64(expires/time.Second), 10))
	req.URL.RawQuery = q.Encode()
	uri, headers, err := s3Signer().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}, req, unsignedPayload, "s3", testRegion, at)
	if err != nil {
		t.Fatal(err)
	}
	out, err := http.NewRequest(req.Method, uri, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range headers {
		if !strings.EqualFold(k, "host") {
			out.Header[k] = vs
		}
	}
	return out
}

// signedPaths are paths as S3 clients send them: each key URI-encoded
// once, strictly, with a key's own "%2F" (a revision such as refs/pr/1)
// encoded again as %252F, and a %2F inside a segment kept.
var signedPaths = []string{
	"/models/org/m/config.json",
	"/models/org/m/with%20space/%C3%A9t%C3%A9%20%F0%9F%A4%97.bin",
	"/models/org/m%40refs%252Fpr%252F1/a%40b%2Bc.safetensors",
	"/models/org/m/dir%2Fname/x~y_z-1.2",
	"/models/org/m/%21%27%28%29%2A%3B%3D%24%26%2C",
	"/",
	"/datasets",
}

var signedQueries = []string{
	"",
	"list-type=2&prefix=org%2Fm%2F&delimiter=%2F&max-keys=10&continuation-token=a%2Bb%3D%3D",
	"prefix=with%20space%2Bplus&b=2&a=2&a=1&empty=&a-b=0",
	"location",
}

func TestHeaderSignatureVerified(t *testing.T) {
	a := newTestAuth(t, signTime.Add(3*time.Minute))
	srv := authServer(t, a)
	for _, p := range signedPaths {
		for _, q := range signedQueries {
			for _, payload := range []string{unsignedPayload, emptySHA256} {
				req := newRequest(t, srv.URL, p, q)
				req.Header.Set("Range", "bytes=0-9")
				req.Header.Set("X-Amz-Meta-Spaces", "  a   b  ")
				signHeader(t, req, testKey, testSecret, payload, signTime)
				if code, body := send(t, req); code != 200 || body != "caller:Bearer "+testToken {
					t.Errorf("%s?%s (%s): %d %q, want the mapped token", p, q, payload, code, body)
				}
			}
		}
	}
}

func TestPresignedSignatureVerified(t *testing.T) {
	a := newTestAuth(t, signTime.Add(time.Hour))
	srv := authServer(t, a)
	for _, p := range signedPaths {
		for _, q := range signedQueries {
			req := presign(t, newRequest(t, srv.URL, p, q), testKey, testSecret, signTime, 2*time.Hour)
			if code, body := send(t, req); code != 200 || body != "caller:Bearer "+testToken {
				t.Errorf("%s?%s: %d %q, want the mapped token", p, q, code, body)
			}
		}
	}
}

// A client that sends a looser encoding than S3's and signs what it sends
// (a raw '@', as Go's URL escaping leaves it) is verified too.
func TestLooseEncodingSignedAsSent(t *testing.T) {
	a := newTestAuth(t, signTime)
	srv := authServer(t, a)
	req := newRequest(t, srv.URL, "/models/org/m@v1/a@b:c.bin", "")
	signHeader(t, req, testKey, testSecret, unsignedPayload, signTime)
	if code, body := send(t, req); code != 200 || body != "caller:Bearer "+testToken {
		t.Fatalf("%d %q", code, body)
	}
	// The other way: signed as S3 encodes it, sent looser (as a proxy that
	// decodes what needs no encoding would pass it on).
	req = newRequest(t, srv.URL, "/models/org/m%40v1/a%40b%3Ac~.bin", "")
	signHeader(t, req, testKey, testSecret, unsignedPayload, signTime)
	req.URL.RawPath = "/models/org/m@v1/a@b:c%7e.bin"
	if code, body := send(t, req); code != 200 || body != "caller:Bearer "+testToken {
		t.Fatalf("sent looser than signed: %d %q", code, body)
	}
}

func TestAnonymousMappedKey(t *testing.T) {
	a := newTestAuth(t, signTime)
	srv := authServer(t, a)
	req := newRequest(t, srv.URL, "/models/org/m/a.bin", "")
	signHeader(t, req, testAnonKey, testAnonSecret, unsignedPayload, signTime)
	if code, body := send(t, req); code != 200 || body != "caller:" {
		t.Fatalf("%d %q, want anonymous", code, body)
	}
	req = newRequest(t, srv.URL, "/models/org/m/a.bin", "")
	signHeader(t, req, testAnonKey, testSecret, unsignedPayload, signTime) // another key's secret
	if code, body := send(t, req); code != 403 || body != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %d %q", code, body)
	}
}

func TestTamperedHeaderRequestRejected(t *testing.T) {
	a := newTestAuth(t, signTime)
	srv := authServer(t, a)
	signed := func() *http.Request {
		req := newRequest(t, srv.URL, "/models/org/m/with%20space/a.bin", "list-type=2&prefix=a")
		req.Header.Set("Range", "bytes=0-9")
		signHeader(t, req, testKey, testSecret, unsignedPayload, signTime)
		return req
	}
	// The untampered request passes, so each failure below is the tamper's.
	if code, body := send(t, signed()); code != 200 {
		t.Fatalf("untampered: %d %q", code, body)
	}
	authz := func(r *http.Request, old, new string) {
		r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), old, new, 1))
	}
	cases := map[string]func(r *http.Request){
		"signature": func(r *http.Request) {
			h := r.Header.Get("Authorization")
			last := h[len(h)-1]
			flip := byte('0')
			if last == '0' {
				flip = '1'
			}
			r.Header.Set("Authorization", h[:len(h)-1]+string(flip))
		},
		"signed header": func(r *http.Request) { r.Header.Set("Range", "bytes=0-99") },
		"path": func(r *http.Request) {
			r.URL.RawPath, r.URL.Path = "/models/org/m/with%20space/b.bin", "/models/org/m/with space/b.bin"
		},
		"path encoding": func(r *http.Request) {
			r.URL.RawPath, r.URL.Path = "/models/org/m/with%2520space/a.bin", "/models/org/m/with%20space/a.bin"
		},
		"query value":     func(r *http.Request) { r.URL.RawQuery = "list-type=2&prefix=b" },
		"query added":     func(r *http.Request) { r.URL.RawQuery += "&max-keys=1" },
		"method":          func(r *http.Request) { r.Method = http.MethodDelete },
		"date":            func(r *http.Request) { r.Header.Set("X-Amz-Date", signTime.Add(time.Second).Format(amzDateLayout)) },
		"payload hash":    func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", emptySHA256) },
		"region":          func(r *http.Request) { authz(r, "/us-east-1/", "/eu-west-1/") },
		"signed list":     func(r *http.Request) { authz(r, "SignedHeaders=host;", "SignedHeaders=") },
		"access key":      func(r *http.Request) { authz(r, testKey, testAnonKey) },
		"host":            func(r *http.Request) { r.Host = "other.example:80" },
		"headers dropped": func(r *http.Request) { r.Header.Del("Range") },
	}
	for name, tamper := range cases {
		req := signed()
		tamper(req)
		code, body := send(t, req)
		want := "SignatureDoesNotMatch"
		if name == "signed list" {
			want = "AuthorizationHeaderMalformed" // host is no longer signed
		}
		if code == 200 || body != want {
			t.Errorf("%s tampered: %d %q, want %s", name, code, body, want)
		}
	}
}

func TestTamperedPresignedRequestRejected(t *testing.T) {
	a := newTestAuth(t, signTime)
	srv := authServer(t, a)
	signed := func() *http.Request {
		return presign(t, newRequest(t, srv.URL, "/models/org/m%40main/%C3%A9.bin", "x-id=GetObject"), testKey, testSecret, signTime, time.Hour)
	}
	if code, body := send(t, signed()); code != 200 {
		t.Fatalf("untampered: %d %q", code, body)
	}
	setQuery := func(r *http.Request, k, v string) {
		q := r.URL.Query()
		q.Set(k, v)
		r.URL.RawQuery = q.Encode()
	}
	cases := map[string]struct {
		tamper func(r *http.Request)
		code   string
	}{
		"expires": {func(r *http.Request) { setQuery(r, "X-Amz-Expires", "7200") }, "SignatureDoesNotMatch"},
		"date":    {func(r *http.Request) { setQuery(r, "X-Amz-Date", signTime.Add(-time.Second).Format(amzDateLayout)) }, "SignatureDoesNotMatch"},
		"param":   {func(r *http.Request) { setQuery(r, "x-id", "HeadObject") }, "SignatureDoesNotMatch"},
		"added":   {func(r *http.Request) { setQuery(r, "response-content-type", "text/html") }, "SignatureDoesNotMatch"},
		"path": {func(r *http.Request) {
			r.URL.RawPath, r.URL.Path = "/models/org/m%40main/%C3%A8.bin", "/models/org/m@main/è.bin"
		}, "SignatureDoesNotMatch"},
		"signature": {func(r *http.Request) { setQuery(r, "X-Amz-Signature", strings.Repeat("0", 64)) }, "SignatureDoesNotMatch"},
		"payload":   {func(r *http.Request) { setQuery(r, "X-Amz-Content-Sha256", emptySHA256) }, "SignatureDoesNotMatch"},
		"no signature": {func(r *http.Request) {
			q := r.URL.Query()
			q.Del("X-Amz-Signature")
			r.URL.RawQuery = q.Encode()
		}, "AuthorizationQueryParametersError"},
		"and a header": {func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken) }, "InvalidRequest"},
	}
	for name, c := range cases {
		req := signed()
		c.tamper(req)
		if code, body := send(t, req); code == 200 || body != c.code {
			t.Errorf("%s tampered: %d %q, want %s", name, code, body, c.code)
		}
	}
}

func TestPresignedExpiry(t *testing.T) {
	cases := []struct {
		expires time.Duration
		now     time.Time
		code    int
		body    string
	}{
		{15 * time.Minute, signTime.Add(15 * time.Minute), 200, "caller:Bearer " + testToken},
		{15 * time.Minute, signTime.Add(15*time.Minute + time.Second), 403, "AccessDenied"},
		{maxExpires, signTime.Add(maxExpires - time.Second), 200, "caller:Bearer " + testToken},
		{maxExpires, signTime.Add(maxExpires + time.Second), 403, "AccessDenied"},
		{maxExpires + time.Second, signTime, 400, "AuthorizationQueryParametersError"},
		// Signed for later than the clock allows for skew: not valid yet.
		{time.Hour, signTime.Add(-maxSkew + time.Second), 200, "caller:Bearer " + testToken},
		{time.Hour, signTime.Add(-maxSkew - time.Second), 403, "AccessDenied"},
	}
	for _, c := range cases {
		srv := authServer(t, newTestAuth(t, c.now))
		req := presign(t, newRequest(t, srv.URL, "/models/org/m/a.bin", ""), testKey, testSecret, signTime, c.expires)
		if code, body := send(t, req); code != c.code || body != c.body {
			t.Errorf("expires %s, now sign%+v: %d %q, want %d %q", c.expires, c.now.Sub(signTime), code, body, c.code, c.body)
		}
	}
}

func TestHeaderClockSkew(t *testing.T) {
	for _, c := range []struct {
		skew time.Duration
		ok   bool
	}{
		{0, true}, {maxSkew, true}, {-maxSkew, true},
		{maxSkew + time.Second, false}, {-maxSkew - time.Second, false}, {24 * time.Hour, false},
	} {
		srv := authServer(t, newTestAuth(t, signTime.Add(c.skew)))
		req := newRequest(t, srv.URL, "/models/org/m/a.bin", "")
		signHeader(t, req, testKey, testSecret, unsignedPayload, signTime)
		code, body := send(t, req)
		if c.ok && code != 200 || !c.ok && (code != 403 || body != "RequestTimeTooSkewed") {
			t.Errorf("clock off by %s: %d %q", c.skew, code, body)
		}
	}
}

// A Hub token as the access key id is that caller whatever the secret: the
// signature cannot be checked, and is not.
func TestHubTokenAccessKey(t *testing.T) {
	a := newTestAuth(t, signTime)
	srv := authServer(t, a)
	const token = "hf_callerOwnToken0123456789abcdefgh"
	want := "caller:Bearer " + token
	for _, secret := range []string{"anything", "something else"} {
		req := newRequest(t, srv.URL, "/models/org/m/a.bin", "")
		signHeader(t, req, token, secret, unsignedPayload, signTime)
		if code, body := send(t, req); code != 200 || body != want {
			t.Errorf("header, secret %q: %d %q", secret, code, body)
		}
		req = presign(t, newRequest(t, srv.URL, "/models/org/m/a.bin", ""), token, secret, signTime, time.Hour)
		if code, body := send(t, req); code != 200 || body != want {
			t.Errorf("presigned, secret %q: %d %q", secret, code, body)
		}
	}
	// Its form and dates are still checked.
	req := newRequest(t, srv.URL, "/models/org/m/a.bin", "")
	signHeader(t, req, token, "x", unsignedPayload, signTime.Add(-time.Hour))
	if code, body := send(t, req); code != 403 || body != "RequestTimeTooSkewed" {
		t.Errorf("skewed hf_ request: %d %q", code, body)
	}
	// Without a credentials file too.
	plain, err := NewAuthenticator(AuthOptions{Now: func() time.Time { return signTime }})
	if err != nil {
		t.Fatal(err)
	}
	srv2 := authServer(t, plain)
	req = newRequest(t, srv2.URL, "/models/org/m/a.bin", "")
	signHeader(t, req, token, "x", unsignedPayload, signTime)
	if code, body := send(t, req); code != 200 || body != want {
		t.Errorf("no credentials file: %d %q", code, body)
	}
	req = newRequest(t, srv2.URL, "/models/org/m/a.bin", "")
	signHeader(t, req, testKey, testSecret, unsignedPayload, signTime)
	if code, body := send(t, req); code != 403 || body != "InvalidAccessKeyId" {
		t.Errorf("no credentials file, other key: %d %q", code, body)
	}
}

func TestUnknownAccessKey(t *testing.T) {
	srv := authServer(t, newTestAuth(t, signTime))
	for _, key := range []string{"AKIDUNKNOWN", "HF_notAToken", "hf"} {
		req := newRequest(t, srv.URL, "/models/org/m/a.bin", "")
		signHeader(t, req, key, testSecret, unsignedPayload, signTime)
		if code, body := send(t, req); code != 403 || body != "InvalidAccessKeyId" {
			t.Errorf("%s: %d %q", key, code, body)
		}
	}
}

func TestUnsignedBearerAndSigV2(t *testing.T) {
	srv := authServer(t, newTestAuth(t, signTime))
	cases := []struct {
		auth, query string
		code        int
		body        string
	}{
		{"", "", 200, "caller:"},
		{"", "list-type=2&prefix=org%2F", 200, "caller:"},
		{"Bearer hf_abc", "", 200, "caller:Bearer hf_abc"},
		{"AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=", "", 400, "InvalidRequest"},
		{"", "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1141889120&Signature=vjbyPxybdZaNmGa%2ByT272YEAiv4%3D", 400, "InvalidRequest"},
		{"AWS4-ECDSA-P256-SHA256 Credential=a/20261203/s3/aws4_request, SignedHeaders=host, Signature=00", "", 400, "InvalidRequest"},
		{"Basic dXNlcjpwYXNz", "", 400, "AuthorizationHeaderMalformed"},
	}
	for _, c := range cases {
		req := newRequest(t, srv.URL, "/models/org/m/a.bin", c.query)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		if code, body := send(t, req); code != c.code || body != c.body {
			t.Errorf("%q ?%s: %d %q, want %d %q", c.auth, c.query, code, body, c.code, c.body)
		}
	}
	req := newRequest(t, srv.URL, "/models/org/m/a.bin", "")
	req.Header.Add("Authorization", "Bearer hf_a")
	req.Header.Add("Authorization", "Bearer hf_b")
	if code, body := send(t, req); code != 400 || body != "AuthorizationHeaderMalformed" {
		t.Errorf("two Authorization headers: %d %q", code, body)
	}
}

func TestPayloadHashOfEmptyBody(t *testing.T) {
	srv := authServer(t, newTestAuth(t, signTime))
	req := newRequest(t, srv.URL, "/models/org/m/a.bin", "")
	// The hash of "x", signed correctly, but the GET has no body.
	signHeader(t, req, testKey, testSecret, "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881", signTime)
	if code, body := send(t, req); code != 400 || body != "XAmzContentSHA256Mismatch" {
		t.Errorf("%d %q", code, body)
	}
	req = newRequest(t, srv.URL, "/models/org/m/a.bin", "")
	signHeader(t, req, testKey, testSecret, "not-a-hash", signTime)
	if code, body := send(t, req); code != 400 || body != "InvalidArgument" {
		t.Errorf("bad hash: %d %q", code, body)
	}
}

// The query's order and its spelling of the same names and values are not
// what is signed: a proxy or client that reorders it, or writes a space
// as '+', leaves the signature valid.
func TestQueryOrderAndSpelling(t *testing.T) {
	srv := authServer(t, newTestAuth(t, signTime))
	req := newRequest(t, srv.URL, "/models", "prefix=with%20space%2Bplus&b=2&a=2&a=1&empty=")
	signHeader(t, req, testKey, testSecret, unsignedPayload, signTime)
	req.URL.RawQuery = "empty&a=2&b=%32&prefix=with+space%2bplus&a=1"
	if code, body := send(t, req); code != 200 || body != "caller:Bearer "+testToken {
		t.Fatalf("reordered query: %d %q", code, body)
	}
	req.URL.RawQuery = "empty&a=1&b=2&prefix=with+space%2bplus" // a=2 dropped
	if code, body := send(t, req); code != 403 || body != "SignatureDoesNotMatch" {
		t.Fatalf("dropped value: %d %q", code, body)
	}
}
