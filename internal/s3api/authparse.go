package s3api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// sigV4 is one request's AWS Signature Version 4, parsed from its
// Authorization header or its presigned query, checked for form only.
type sigV4 struct {
	presigned     bool
	accessKey     string
	scopeDate     string // yyyymmdd
	region        string
	signedHeaders []string // lower case, sorted, with "host"
	signature     string   // 64 lower-case hex digits
	amzDate       string   // the request time as the string to sign holds it
	time          time.Time
	expires       time.Duration // presigned only
	payloadHash   string        // the canonical request's last line
}

const (
	sigAlgorithm = "AWS4-HMAC-SHA256"
	// sigV4aAlgorithm is the asymmetric, multi-region variant; a secret
	// shared with this server cannot check it.
	sigV4aAlgorithm = "AWS4-ECDSA-P256-SHA256"
	amzDateLayout   = "20060102T150405Z"
	unsignedPayload = "UNSIGNED-PAYLOAD"
	// emptySHA256 is the hex SHA-256 of no bytes: the payload hash of a
	// request without a body.
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// parseAuthHeader parses an "AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/
// s3/aws4_request, SignedHeaders=a;b, Signature=HEX" header, taking the
// request time from X-Amz-Date (or Date) and the payload hash from
// x-amz-content-sha256, which S3 requires of every header-signed request.
func parseAuthHeader(auth string, h http.Header) (*sigV4, error) {
	scheme, rest, _ := strings.Cut(auth, " ")
	switch scheme {
	case sigAlgorithm:
	case sigV4aAlgorithm:
		return nil, invalidRequest("Signature Version 4A (%s) is not supported; sign with %s", sigV4aAlgorithm, sigAlgorithm)
	default:
		return nil, headerMalformed("the authorization header names an unsupported scheme; use %s (or Bearer with a Hub token)", sigAlgorithm)
	}
	fields := map[string]string{}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
			// The header's parts are not echoed: a garbled one may be a token.
			return nil, headerMalformed("the authorization header holds a component that is not Key=Value")
		case k != "Credential" && k != "SignedHeaders" && k != "Signature":
			return nil, headerMalformed("the authorization header holds a component other than Credential, SignedHeaders and Signature")
		}
		if _, dup := fields[k]; dup {
			return nil, headerMalformed("the authorization header holds %s twice", k)
		}
		fields[k] = v
	}
	for _, k := range []string{"Credential", "SignedHeaders", "Signature"} {
		if _, ok := fields[k]; !ok {
			return nil, headerMalformed("the authorization header lacks %s=", k)
		}
	}
	sig := &sigV4{}
	var err error
	if sig.time, sig.amzDate, err = headerDate(h); err != nil {
		return nil, err
	}
	if err := sig.parseCommon(fields["Credential"], fields["SignedHeaders"], fields["Signature"], headerMalformed); err != nil {
		return nil, err
	}
	hashes := h.Values("X-Amz-Content-Sha256")
	if len(hashes) != 1 {
		return nil, invalidRequest("a header-signed request carries exactly one x-amz-content-sha256 header (the hex SHA-256 of its body, or %s)", unsignedPayload)
	}
	if sig.payloadHash, err = payloadHash(hashes[0]); err != nil {
		return nil, err
	}
	return sig, nil
}

// headerDate is a header-signed request's time: X-Amz-Date, or Date (an
// HTTP date) when it has none.
func headerDate(h http.Header) (time.Time, string, error) {
	if vs := h.Values("X-Amz-Date"); len(vs) > 0 {
		if len(vs) > 1 {
			return time.Time{}, "", headerMalformed("the request carries X-Amz-Date %d times", len(vs))
		}
		t, err := parseAmzDate(vs[0])
		if err != nil {
			return time.Time{}, "", headerMalformed("X-Amz-Date %q is not of the form %s", clip(vs[0]), amzDateLayout)
		}
		return t, vs[0], nil
	}
	d := h.Get("Date")
	if d == "" {
		return time.Time{}, "", headerMalformed("a signed request needs an X-Amz-Date or Date header")
	}
	t, err := http.ParseTime(d)
	if err != nil {
		return time.Time{}, "", headerMalformed("the Date header %q is not an HTTP date", clip(d))
	}
	t = t.UTC()
	return t, t.Format(amzDateLayout), nil
}

// presignParams are the query parameters a presigned URL must carry, each
// once.
var presignParams = []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"}

// parsePresigned parses a presigned URL's X-Amz-* query parameters. Its
// payload is unsigned, as the SDKs presign it, unless the URL itself says
// X-Amz-Content-Sha256.
func parsePresigned(q url.Values) (*sigV4, error) {
	for _, k := range presignParams {
		if n := len(q[k]); n != 1 {
			return nil, queryMalformed("a presigned URL carries %s exactly once, not %d times", k, n)
		}
	}
	switch alg := q.Get("X-Amz-Algorithm"); alg {
	case sigAlgorithm:
	case sigV4aAlgorithm:
		return nil, invalidRequest("Signature Version 4A (%s) is not supported; presign with %s", sigV4aAlgorithm, sigAlgorithm)
	default:
		return nil, queryMalformed("X-Amz-Algorithm %q is not supported; use %s", clip(alg), sigAlgorithm)
	}
	sig := &sigV4{presigned: true, payloadHash: unsignedPayload}
	var err error
	sig.amzDate = q.Get("X-Amz-Date")
	if sig.time, err = parseAmzDate(sig.amzDate); err != nil {
		return nil, queryMalformed("X-Amz-Date %q is not of the form %s", clip(sig.amzDate), amzDateLayout)
	}
	exp := q.Get("X-Amz-Expires")
	secs, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !allDigits(exp) || secs < 1 || secs > int64(maxExpires/time.Second) {
		return nil, queryMalformed("X-Amz-Expires %q must be a number of seconds from 1 to %d (a week)", clip(exp), int64(maxExpires/time.Second))
	}
	sig.expires = time.Duration(secs) * time.Second
	if err := sig.parseCommon(q.Get("X-Amz-Credential"), q.Get("X-Amz-SignedHeaders"), q.Get("X-Amz-Signature"), queryMalformed); err != nil {
		return nil, err
	}
	if hs, ok := q["X-Amz-Content-Sha256"]; ok {
		if len(hs) != 1 {
			return nil, queryMalformed("a presigned URL carries X-Amz-Content-Sha256 at most once")
		}
		if sig.payloadHash, err = payloadHash(hs[0]); err != nil {
			return nil, err
		}
	}
	return sig, nil
}

// parseCommon parses what both forms share: the credential scope, the
// signed headers and the signature. bad makes the form's error.
func (sig *sigV4) parseCommon(credential, signedHeaders, signature string, bad func(string, ...any) *AuthError) error {
	parts := strings.Split(credential, "/")
	if len(parts) != 5 {
		return bad("the credential must be ACCESS_KEY_ID/yyyymmdd/region/s3/aws4_request")
	}
	sig.accessKey, sig.scopeDate, sig.region = parts[0], parts[1], parts[2]
	switch {
	case !validAccessKeyID(sig.accessKey):
		return bad("the credential's access key id is empty, longer than %d bytes or holds characters other than letters, digits, '_', '-' and '.'", maxAccessKeyLen)
	case len(sig.scopeDate) != 8 || !allDigits(sig.scopeDate):
		return bad("the credential's date %q is not yyyymmdd", clip(sig.scopeDate))
	case sig.scopeDate != sig.amzDate[:8]:
		return bad("the credential's date %s is not the request's date %s", sig.scopeDate, sig.amzDate[:8])
	case !validRegion(sig.region):
		return bad("the credential's region %q is not a region name", clip(sig.region))
	case parts[3] != "s3":
		return bad("the credential's service is %q; this is s3", clip(parts[3]))
	case parts[4] != "aws4_request":
		return bad("the credential must end in aws4_request, not %q", clip(parts[4]))
	}
	sig.signedHeaders = strings.Split(signedHeaders, ";")
	host := false
	for i, h := range sig.signedHeaders {
		switch {
		case !validHeaderName(h):
			return bad("signed header %q is not a lower-case header name", clip(h))
		case i > 0 && h <= sig.signedHeaders[i-1]:
			return bad("signed headers must be sorted and listed once; %q comes after %q", clip(h), clip(sig.signedHeaders[i-1]))
		}
		host = host || h == "host"
	}
	if !host {
		return bad("the host header must be signed")
	}
	if len(signature) != 64 || !isLowerHex(signature) {
		return bad("the signature must be 64 lower-case hex digits")
	}
	sig.signature = signature
	return nil
}

// checkTime holds the request's time to S3's rules: a header-signed
// request within maxSkew of now, a presigned one after its date (less the
// skew) and before it expires.
func (sig *sigV4) checkTime(now time.Time) error {
	if sig.presigned {
		switch {
		case sig.time.After(now.Add(maxSkew)):
			return authErr("AccessDenied", http.StatusForbidden, "request is not valid yet: X-Amz-Date is in the future")
		case now.After(sig.time.Add(sig.expires)):
			return authErr("AccessDenied", http.StatusForbidden, "request has expired")
		}
		return nil
	}
	if d := now.Sub(sig.time); d > maxSkew || d < -maxSkew {
		return authErr("RequestTimeTooSkewed", http.StatusForbidden,
			"the difference between the request time and the server's time is too large (more than %s)", maxSkew)
	}
	return nil
}

// payloadHash checks an x-amz-content-sha256 value.
func payloadHash(v string) (string, error) {
	if v == unsignedPayload || strings.HasPrefix(v, "STREAMING-") || len(v) == 64 && isLowerHex(v) {
		return v, nil
	}
	return "", authErr("InvalidArgument", http.StatusBadRequest,
		"x-amz-content-sha256 must be the hex SHA-256 of the body or %s", unsignedPayload)
}

// parseAmzDate parses an ISO 8601 basic UTC time; only its canonical
// spelling passes, as the string to sign holds it verbatim.
func parseAmzDate(v string) (time.Time, error) {
	t, err := time.Parse(amzDateLayout, v)
	if err == nil && t.Format(amzDateLayout) != v {
		err = strconv.ErrSyntax
	}
	return t, err
}

// maxAccessKeyLen bounds an access key id: AWS's are 16 to 128 characters,
// a Hub token is under 100.
const maxAccessKeyLen = 256

func validAccessKeyID(s string) bool {
	if s == "" || len(s) > maxAccessKeyLen {
		return false
	}
	for _, c := range []byte(s) {
		if !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func validRegion(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func allDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func isLowerHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// clip keeps a client's value short in an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
