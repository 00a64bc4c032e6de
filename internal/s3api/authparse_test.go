package s3api

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// serverRequest is r as Go's server hands it over: Host apart, the path
// parsed from its escaped form.
func serverRequest(t testing.TB, method, target, host string, header map[string]string) *http.Request {
	t.Helper()
	u, err := url.ParseRequestURI(target)
	if err != nil {
		t.Fatal(err)
	}
	r := &http.Request{Method: method, URL: u, Host: host, Header: http.Header{}, RequestURI: target}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	return r
}

// The worked examples of Amazon's S3 SigV4 documentation
// (sig-v4-header-based-auth.html, sigv4-query-string-auth.html): a
// signature computed by AWS, not by the SDK these other tests sign with.
func TestAWSDocumentedExamples(t *testing.T) {
	const (
		akid   = "AKIAIOSFODNN7EXAMPLE"
		secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
		host   = "examplebucket.s3.amazonaws.com"
		scope  = akid + "/20130524/us-east-1/s3/aws4_request"
	)
	now := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	a := &Authenticator{now: func() time.Time { return now }, keys: map[string]credential{akid: {secret: secret}}}
	header := func(signed, sig string, extra map[string]string) map[string]string {
		h := map[string]string{
			"Authorization":        "AWS4-HMAC-SHA256 Credential=" + scope + ",SignedHeaders=" + signed + ",Signature=" + sig,
			"X-Amz-Date":           "20130524T000000Z",
			"X-Amz-Content-Sha256": emptySHA256,
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	cases := []struct {
		name, target string
		header       map[string]string
	}{
		{"GET object", "/test.txt", header("host;range;x-amz-content-sha256;x-amz-date",
			"f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41", map[string]string{"Range": "bytes=0-9"})},
		{"GET bucket lifecycle", "/?lifecycle", header("host;x-amz-content-sha256;x-amz-date",
			"fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543", nil)},
		{"list objects", "/?max-keys=2&prefix=J", header("host;x-amz-content-sha256;x-amz-date",
			"34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7", nil)},
		{"presigned GET", "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request" +
			"&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host" +
			"&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404", nil},
	}
	for _, c := range cases {
		r := serverRequest(t, http.MethodGet, c.target, host, c.header)
		if _, err := a.Caller(r); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		// And one changed byte of the secret fails it.
		b := &Authenticator{now: a.now, keys: map[string]credential{akid: {secret: secret[:len(secret)-1] + "X"}}}
		if _, err := b.Caller(r); !isAuthCode(err, "SignatureDoesNotMatch") {
			t.Errorf("%s with another secret: %v", c.name, err)
		}
	}
}

func isAuthCode(err error, code string) bool {
	var ae *AuthError
	return errors.As(err, &ae) && ae.Code == code
}

func TestMalformedAuthorizationHeader(t *testing.T) {
	const (
		date  = "20261203T060000Z"
		cred  = "Credential=hf_secretTokenValue/20261203/us-east-1/s3/aws4_request"
		sh    = "SignedHeaders=host;x-amz-content-sha256;x-amz-date"
		sig   = "Signature=" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		valid = "AWS4-HMAC-SHA256 " + cred + ", " + sh + ", " + sig
	)
	withCred := func(c string) string { return "AWS4-HMAC-SHA256 Credential=" + c + ", " + sh + ", " + sig }
	withSigned := func(s string) string { return "AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=" + s + ", " + sig }
	const malformed, invalid = "AuthorizationHeaderMalformed", "InvalidRequest"
	cases := []struct {
		name, auth string
		header     map[string]string // replaces the default X-Amz-Date and x-amz-content-sha256 where set
		code       string            // "" for accepted
	}{
		{"valid", valid, nil, ""},
		{"no spaces after commas", "AWS4-HMAC-SHA256 " + cred + "," + sh + "," + sig, nil, ""},
		{"Date instead of X-Amz-Date", valid, map[string]string{"X-Amz-Date": "", "Date": "Thu, 03 Dec 2026 06:00:00 GMT"}, ""},
		{"scheme only", "AWS4-HMAC-SHA256", nil, malformed},
		{"scheme lower case", "aws4-hmac-sha256 " + cred + ", " + sh + ", " + sig, nil, malformed},
		{"empty", "AWS4-HMAC-SHA256 ", nil, malformed},
		{"no signature", "AWS4-HMAC-SHA256 " + cred + ", " + sh, nil, malformed},
		{"no credential", "AWS4-HMAC-SHA256 " + sh + ", " + sig, nil, malformed},
		{"credential twice", "AWS4-HMAC-SHA256 " + cred + ", " + cred + ", " + sh + ", " + sig, nil, malformed},
		{"unknown component", valid + ", Foo=bar", nil, malformed},
		{"not key=value", valid + ", hf_tokenInTheWrongPlace", nil, malformed},
		{"trailing comma", valid + ",", nil, malformed},
		{"credential short", withCred("AKID/20261203/us-east-1/s3"), nil, malformed},
		{"credential long", withCred("AKID/20261203/us-east-1/s3/aws4_request/x"), nil, malformed},
		{"empty access key", withCred("/20261203/us-east-1/s3/aws4_request"), nil, malformed},
		{"access key with +", withCred("AK+ID/20261203/us-east-1/s3/aws4_request"), nil, malformed},
		{"access key too long", withCred(strings.Repeat("A", 257) + "/20261203/us-east-1/s3/aws4_request"), nil, malformed},
		{"scope date other day", withCred("AKID/20261202/us-east-1/s3/aws4_request"), nil, malformed},
		{"scope date not digits", withCred("AKID/2026120x/us-east-1/s3/aws4_request"), nil, malformed},
		{"region upper case", withCred("AKID/20261203/US-EAST-1/s3/aws4_request"), nil, malformed},
		{"region empty", withCred("AKID/20261203//s3/aws4_request"), nil, malformed},
		{"service", withCred("AKID/20261203/us-east-1/ec2/aws4_request"), nil, malformed},
		{"terminator", withCred("AKID/20261203/us-east-1/s3/aws5_request"), nil, malformed},
		{"signed headers unsorted", withSigned("x-amz-date;host"), nil, malformed},
		{"signed headers repeated", withSigned("host;host;x-amz-date"), nil, malformed},
		{"signed headers upper case", withSigned("Host;x-amz-date"), nil, malformed},
		{"signed headers empty", withSigned(""), nil, malformed},
		{"signed headers empty item", withSigned("host;;x-amz-date"), nil, malformed},
		{"host not signed", withSigned("x-amz-content-sha256;x-amz-date"), nil, malformed},
		{"signature short", strings.TrimSuffix(valid, "f"), nil, malformed},
		{"signature upper case", strings.TrimSuffix(valid, "abcdef") + "ABCDEF", nil, malformed},
		{"X-Amz-Date extended form", valid, map[string]string{"X-Amz-Date": "2026-12-03T06:00:00Z"}, malformed},
		{"X-Amz-Date no Z", valid, map[string]string{"X-Amz-Date": "20261203T060000"}, malformed},
		{"no date at all", valid, map[string]string{"X-Amz-Date": ""}, malformed},
		{"Date unparsable", valid, map[string]string{"X-Amz-Date": "", "Date": "yesterday"}, malformed},
		{"no content sha256", valid, map[string]string{"X-Amz-Content-Sha256": ""}, invalid},
		{"SigV4A", "AWS4-ECDSA-P256-SHA256 " + cred + ", " + sh + ", " + sig, nil, invalid},
		{"SigV2", "AWS hf_secretTokenValue:c2lnbmF0dXJl", nil, invalid},
	}
	a := &Authenticator{now: func() time.Time { return time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC) }}
	for _, c := range cases {
		h := map[string]string{"Authorization": c.auth, "X-Amz-Date": date, "X-Amz-Content-Sha256": unsignedPayload}
		for k, v := range c.header {
			h[k] = v
		}
		r := serverRequest(t, http.MethodGet, "/models/org/m/a.bin", "h", nil)
		for k, v := range h {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		caller, err := a.Caller(r)
		if c.code == "" {
			if err != nil || caller.Auth() != "Bearer hf_secretTokenValue" {
				t.Errorf("%s: %v, %v; want the token's caller", c.name, caller, err)
			}
			continue
		}
		var ae *AuthError
		if !errors.As(err, &ae) || ae.Code != c.code || ae.Status != http.StatusBadRequest {
			t.Errorf("%s: %v; want %s (400)", c.name, err, c.code)
			continue
		}
		if strings.Contains(ae.Message, "hf_secret") {
			t.Errorf("%s: the message shows the token: %s", c.name, ae.Message)
		}
	}
}

func TestMalformedPresignedQuery(t *testing.T) {
	good := url.Values{
		"X-Amz-Algorithm":     {"AWS4-HMAC-SHA256"},
		"X-Amz-Credential":    {"hf_secretTokenValue/20261203/us-east-1/s3/aws4_request"},
		"X-Amz-Date":          {"20261203T060000Z"},
		"X-Amz-Expires":       {"900"},
		"X-Amz-SignedHeaders": {"host"},
		"X-Amz-Signature":     {strings.Repeat("ab", 32)},
	}
	const malformed = "AuthorizationQueryParametersError"
	cases := []struct {
		name string
		edit func(q url.Values)
		code string
	}{
		{"valid", func(url.Values) {}, ""},
		{"expires a week", func(q url.Values) { q.Set("X-Amz-Expires", "604800") }, ""},
		{"expires over a week", func(q url.Values) { q.Set("X-Amz-Expires", "604801") }, malformed},
		{"expires zero", func(q url.Values) { q.Set("X-Amz-Expires", "0") }, malformed},
		{"expires negative", func(q url.Values) { q.Set("X-Amz-Expires", "-1") }, malformed},
		{"expires signed", func(q url.Values) { q.Set("X-Amz-Expires", "+60") }, malformed},
		{"expires float", func(q url.Values) { q.Set("X-Amz-Expires", "1e3") }, malformed},
		{"expires huge", func(q url.Values) { q.Set("X-Amz-Expires", "99999999999999999999") }, malformed},
		{"algorithm", func(q url.Values) { q.Set("X-Amz-Algorithm", "AWS4-HMAC-SHA1") }, malformed},
		{"SigV4A", func(q url.Values) { q.Set("X-Amz-Algorithm", "AWS4-ECDSA-P256-SHA256") }, "InvalidRequest"},
		{"credential", func(q url.Values) { q.Set("X-Amz-Credential", "hf_secretTokenValue/20261203/us-east-1/s3") }, malformed},
		{"date", func(q url.Values) { q.Set("X-Amz-Date", "20261203") }, malformed},
		{"signature", func(q url.Values) { q.Set("X-Amz-Signature", "xyz") }, malformed},
		{"signed headers", func(q url.Values) { q.Set("X-Amz-SignedHeaders", "range") }, malformed},
		{"signature twice", func(q url.Values) { q.Add("X-Amz-Signature", strings.Repeat("cd", 32)) }, malformed},
		{"content sha256 twice", func(q url.Values) {
			q.Add("X-Amz-Content-Sha256", unsignedPayload)
			q.Add("X-Amz-Content-Sha256", unsignedPayload)
		}, malformed},
		{"content sha256 bad", func(q url.Values) { q.Set("X-Amz-Content-Sha256", "xyz") }, "InvalidArgument"},
	}
	for _, k := range presignParams {
		cases = append(cases, struct {
			name string
			edit func(q url.Values)
			code string
		}{"no " + k, func(q url.Values) { q.Del(k) }, malformed})
	}
	a := &Authenticator{now: func() time.Time { return time.Date(2026, 12, 3, 6, 1, 0, 0, time.UTC) }}
	for _, c := range cases {
		q := url.Values{}
		for k, v := range good {
			q[k] = append([]string(nil), v...)
		}
		c.edit(q)
		r := serverRequest(t, http.MethodGet, "/models/org/m/a.bin?"+q.Encode(), "h", nil)
		caller, err := a.Caller(r)
		if c.code == "" {
			if err != nil || caller.Auth() != "Bearer hf_secretTokenValue" {
				t.Errorf("%s: %v, %v; want the token's caller", c.name, caller, err)
			}
			continue
		}
		var ae *AuthError
		if !errors.As(err, &ae) || ae.Code != c.code || ae.Status != http.StatusBadRequest {
			t.Errorf("%s: %v; want %s (400)", c.name, err, c.code)
			continue
		}
		if strings.Contains(ae.Message, "hf_secret") {
			t.Errorf("%s: the message shows the token: %s", c.name, ae.Message)
		}
	}
}

// FuzzCaller: no header, query or path makes Caller panic, and every
// refusal is an AuthError with a 4xx status.
func FuzzCaller(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKIDHUBPROXYTEST01/20261203/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature="+strings.Repeat("0", 64),
		"", "20261203T060000Z", "/models/org/m/a%20b")
	f.Add("AWS4-HMAC-SHA256 Credential=hf_x/20261203/us-east-1/s3/aws4_request,SignedHeaders=host,Signature="+strings.Repeat("a", 64),
		"list-type=2", "20261203T060000Z", "/")
	f.Add("", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDHUBPROXYTEST01%2F20261203%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261203T060000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature="+strings.Repeat("1", 64),
		"", "/models/%E2%82%AC")
	f.Add("AWS4-HMAC-SHA256 ,,,===", "a=%zz;b", "0", "//%2F/")
	f.Add("AWS a:b", "AWSAccessKeyId=x&Signature=y&Expires=1", "", "/a")
	f.Add("Bearer hf_x", "", "", "/")
	now := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	a := &Authenticator{now: func() time.Time { return now }, keys: map[string]credential{"AKIDHUBPROXYTEST01": {secret: "s"}}}
	f.Fuzz(func(t *testing.T, auth, rawQuery, amzDate, rawPath string) {
		u := &url.URL{RawQuery: rawQuery}
		if p, err := url.PathUnescape(rawPath); err == nil {
			u.Path, u.RawPath = p, rawPath
		} else {
			u.Path = rawPath
		}
		r := &http.Request{Method: http.MethodGet, URL: u, Host: "h", Header: http.Header{}}
		if auth != "" {
			r.Header["Authorization"] = []string{auth}
		}
		if amzDate != "" {
			r.Header["X-Amz-Date"] = []string{amzDate}
		}
		r.Header["X-Amz-Content-Sha256"] = []string{unsignedPayload}
		_, err := a.Caller(r)
		if err == nil {
			return
		}
		var ae *AuthError
		if !errors.As(err, &ae) || ae.Code == "" || ae.Message == "" || ae.Status < 400 || ae.Status > 499 {
			t.Fatalf("%#v: not a 4xx AuthError", err)
		}
	})
}
