package s3api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// candidates are the canonical requests r may have been signed as. S3's
// rule is one: the path's segments decoded and URI-encoded once, strictly
// (RFC 3986 unreserved characters kept, '/' between segments kept, every
// other byte %XX in upper case; S3, unlike other services, does not encode
// it a second time), which is how the SDKs, boto3 and the AWS CLI encode
// keys before signing. A client that sent a looser encoding (a raw '@', a
// lower-case %2f) and signed what it sent is the second: the path exactly
// as it came, which proves as much. A %2F inside a segment stays one: it
// is part of a key's name, not a separator.
func (sig *sigV4) candidates(r *http.Request) ([]string, error) {
	query, err := canonicalQuery(r.URL.RawQuery, sig.presigned)
	if err != nil {
		return nil, err
	}
	if !sig.presigned && r.ContentLength == 0 && len(sig.payloadHash) == 64 && sig.payloadHash != emptySHA256 {
		// The body is known to be empty, and the client says it is not.
		// (A body that is there is not hashed: no S3 route here reads one.)
		return nil, authErr("XAmzContentSHA256Mismatch", http.StatusBadRequest,
			"x-amz-content-sha256 does not match the empty body of this request")
	}
	headers := sig.canonicalHeaders(r)
	sent := r.URL.RawPath
	if sent == "" {
		sent = r.URL.EscapedPath()
	}
	paths := []string{strictPath(sent)}
	if paths[0] != sent {
		paths = append(paths, sent)
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = strings.Join([]string{r.Method, p, query, headers, strings.Join(sig.signedHeaders, ";"), sig.payloadHash}, "\n")
	}
	return out, nil
}

// strictPath re-encodes an escaped path segment by segment, as S3 encodes
// a canonical URI.
func strictPath(escaped string) string {
	if escaped == "" {
		return "/"
	}
	segs := strings.Split(escaped, "/")
	for i, s := range segs {
		if dec, err := url.PathUnescape(s); err == nil {
			segs[i] = uriEncode(dec)
		}
	}
	return strings.Join(segs, "/")
}

// uriEncode percent-encodes every byte outside RFC 3986's unreserved set,
// in upper-case hex: SigV4's UriEncode.
func uriEncode(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for _, c := range []byte(s) {
		if isAlnum(c) || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// canonicalQuery is the query as SigV4 signs it: every name and value
// decoded, then URI-encoded, sorted by name and then value; a presigned
// URL's own X-Amz-Signature is left out.
func canonicalQuery(raw string, presigned bool) (string, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return "", authErr("InvalidArgument", http.StatusBadRequest, "the query string is not valid percent-encoding, so its signature cannot be checked")
	}
	if presigned {
		delete(q, "X-Amz-Signature")
	}
	type pair struct{ k, v string }
	var pairs []pair
	for k, vs := range q {
		ek := uriEncode(k)
		for _, v := range vs {
			pairs = append(pairs, pair{ek, uriEncode(v)})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := strings.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = p.k + "=" + p.v
	}
	return strings.Join(parts, "&"), nil
}

// canonicalHeaders is each signed header's "name:value\n", its values
// trimmed, inner runs of spaces folded to one and repeated values joined
// by commas. Go's server keeps Host apart from the other headers, and a
// signed header the request lacks is signed as empty (and so fails).
func (sig *sigV4) canonicalHeaders(r *http.Request) string {
	var b strings.Builder
	for _, name := range sig.signedHeaders {
		var values []string
		switch {
		case name == "host":
			values = []string{r.Host}
		case name == "content-length" && r.Header.Get("Content-Length") == "" && r.ContentLength >= 0:
			values = []string{strconv.FormatInt(r.ContentLength, 10)}
		default:
			values = r.Header.Values(name)
		}
		b.WriteString(name)
		b.WriteByte(':')
		for i, v := range values {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(trimAll(v))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// sign is the signature of canonical under secret: the string to sign
// (algorithm, time, scope, hash of the canonical request) under the key
// derived from the secret through the scope's date, region and service.
func (sig *sigV4) sign(secret, canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	scope := sig.scopeDate + "/" + sig.region + "/s3/aws4_request"
	toSign := sigAlgorithm + "\n" + sig.amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+secret), sig.scopeDate)
	key = hmacSHA256(key, sig.region)
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	return hex.EncodeToString(hmacSHA256(key, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// trimAll trims a header value and folds each run of spaces inside it to
// one, as SigV4's Trimall (and the SDKs' signers) do; tabs inside are kept.
func trimAll(v string) string {
	v = strings.TrimSpace(v)
	if !strings.Contains(v, "  ") {
		return v
	}
	var b strings.Builder
	b.Grow(len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' && i > 0 && v[i-1] == ' ' {
			continue
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
