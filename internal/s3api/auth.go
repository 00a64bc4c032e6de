package s3api

import (
	"crypto/hmac"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// AuthError is a request whose credentials this API refuses. Code is the S3
// error code, Status the HTTP status S3 answers it with; Message is safe to
// show to clients: it never holds a secret, a token or an access key id.
type AuthError struct {
	Code    string
	Status  int
	Message string
}

func (e *AuthError) Error() string { return e.Code + ": " + e.Message }

func authErr(code string, status int, format string, args ...any) *AuthError {
	return &AuthError{Code: code, Status: status, Message: fmt.Sprintf(format, args...)}
}

// The S3 codes of AuthError, with the statuses S3 answers them with.
func headerMalformed(format string, args ...any) *AuthError {
	return authErr("AuthorizationHeaderMalformed", http.StatusBadRequest, format, args...)
}

func queryMalformed(format string, args ...any) *AuthError {
	return authErr("AuthorizationQueryParametersError", http.StatusBadRequest, format, args...)
}

func invalidRequest(format string, args ...any) *AuthError {
	return authErr("InvalidRequest", http.StatusBadRequest, format, args...)
}

const (
	// maxSkew is how far X-Amz-Date may be from this server's clock, as S3
	// allows: a captured request cannot be replayed after it.
	maxSkew = 15 * time.Minute
	// maxExpires is the longest a presigned URL may be valid, as S3 allows.
	maxExpires = 7 * 24 * time.Hour
)

// AuthOptions configures an Authenticator.
type AuthOptions struct {
	// CredentialsFile is the s3-credentials-file: access keys whose secret
	// this server knows, each mapped to the Hub token its requests use (see
	// readCredentials for its format). Empty: only Hub tokens and anonymous callers.
	CredentialsFile string
	// Now is the clock X-Amz-Date and presigned expiry are judged by; nil
	// is time.Now.
	Now func() time.Time
}

// Authenticator turns an S3 request's credentials into the hub.Caller the
// core serves it for. It holds no policy: what the caller may read is
// decided as on the hub routes, by admission and by the Hub.
type Authenticator struct {
	keys map[string]credential
	now  func() time.Time
}

// NewAuthenticator reads the credentials file, if any, once.
func NewAuthenticator(opts AuthOptions) (*Authenticator, error) {
	a := &Authenticator{now: opts.Now}
	if a.now == nil {
		a.now = time.Now
	}
	if opts.CredentialsFile != "" {
		keys, err := readCredentials(opts.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("s3-credentials-file: %w", err)
		}
		a.keys = keys
	}
	return a, nil
}

// hubTokenPrefix starts every Hub user access token; an access key id with
// it is taken as the caller's Hub token.
const hubTokenPrefix = "hf_"

// Caller is who r comes from: the anonymous caller for an unsigned
// request, the Hub token for a SigV4 request whose access key id is one
// (or a credentials-file key's mapped token, once its signature checks), or
// an *AuthError. An "Authorization: Bearer" header, as the hub routes take
// it, is that caller too, so one curl line works on both front doors.
func (a *Authenticator) Caller(r *http.Request) (hub.Caller, error) {
	auths := r.Header.Values("Authorization")
	query, _ := url.ParseQuery(r.URL.RawQuery) // only to look for auth parameters; verify parses strictly
	presigned := query.Has("X-Amz-Algorithm") || query.Has("X-Amz-Credential") || query.Has("X-Amz-Signature")
	switch {
	case len(auths) > 1:
		return hub.Caller{}, headerMalformed("a request carries one Authorization header, not %d", len(auths))
	case len(auths) == 1 && presigned:
		return hub.Caller{}, invalidRequest("only one auth mechanism allowed: an Authorization header or X-Amz-* query parameters, not both")
	case query.Has("AWSAccessKeyId") || query.Has("Signature") && query.Has("Expires"):
		return hub.Caller{}, invalidRequest("query string authentication version 2 is not supported; presign with AWS4-HMAC-SHA256 (Signature Version 4)")
	case presigned:
		sig, err := parsePresigned(query)
		if err != nil {
			return hub.Caller{}, err
		}
		return a.check(r, sig)
	case len(auths) == 0:
		return hub.Caller{}, nil
	}
	auth := auths[0]
	scheme, _, _ := strings.Cut(auth, " ")
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		return hub.NewCaller(auth), nil
	case scheme == "AWS":
		return hub.Caller{}, invalidRequest("the authorization mechanism you have provided (AWS Signature Version 2) is not supported; please use AWS4-HMAC-SHA256")
	}
	sig, err := parseAuthHeader(auth, r.Header)
	if err != nil {
		return hub.Caller{}, err
	}
	return a.check(r, sig)
}

// check judges a parsed signature: its date, then whose key it is, then
// (for a key whose secret is known) the signature itself.
func (a *Authenticator) check(r *http.Request, sig *sigV4) (hub.Caller, error) {
	if err := sig.checkTime(a.now()); err != nil {
		return hub.Caller{}, err
	}
	if strings.HasPrefix(sig.accessKey, hubTokenPrefix) {
		// The access key id is a Hub token. Its signature was made with a
		// secret only the client knows (any string serves: the SDKs insist
		// on one), so it cannot be verified here, and verifying it would
		// prove nothing: whoever holds the token may sign with any secret.
		// The token itself is the credential, as in a Bearer header; the
		// Hub decides what it may read, and a wrong or revoked token gets
		// what it would get on the hub routes. Parsing and the date checks
		// above still hold it to the SigV4 form, so a garbled request is
		// told so instead of being served anonymously.
		return hub.NewCaller("Bearer " + sig.accessKey), nil
	}
	cred, ok := a.keys[sig.accessKey]
	if !ok {
		return hub.Caller{}, authErr("InvalidAccessKeyId", http.StatusForbidden,
			"the access key id is neither a Hub token (hf_…) nor a key of this hubproxy's s3-credentials-file")
	}
	want, err := sig.candidates(r)
	if err != nil {
		return hub.Caller{}, err
	}
	got := []byte(sig.signature)
	match := false
	for _, canonical := range want {
		// Every candidate is computed and compared in constant time, so
		// the time taken says nothing about which bytes matched.
		s := []byte(sig.sign(cred.secret, canonical))
		match = hmac.Equal(s, got) || match
	}
	if !match {
		return hub.Caller{}, authErr("SignatureDoesNotMatch", http.StatusForbidden,
			"the request signature we calculated does not match the signature you provided; check your secret access key and signing method")
	}
	return cred.caller, nil
}
