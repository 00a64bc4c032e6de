package s3api

import (
	"net/http"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// TokenAuth is the CallerAuth used when no other is configured. An
// unsigned request is the anonymous caller. A SigV4 request (the
// Authorization header, or a presigned URL's X-Amz-Credential) whose access
// key id is a Hub token ("hf_…") is the caller holding that token: it goes
// upstream as "Bearer <token>", and the Hub decides what it may read, as on
// every hub route. The signature is not checked: it is made with a secret
// hubproxy does not know, so it proves nothing here, and the token is the
// credential.
type TokenAuth struct{}

// Caller implements CallerAuth.
func (TokenAuth) Caller(r *http.Request) (hub.Caller, error) {
	akid, signed, err := accessKeyID(r)
	if err != nil || !signed {
		return hub.Caller{}, err
	}
	if !strings.HasPrefix(akid, "hf_") || strings.ContainsAny(akid, " \t\r\n") {
		return hub.Caller{}, &CallerError{Code: "InvalidAccessKeyId",
			Reason: "the access key id is not a Hugging Face token (hf_…); send the token as the access key id, or no credentials"}
	}
	return hub.NewCaller("Bearer " + akid), nil
}

// accessKeyID reads the access key id of a SigV4 request: the first part
// of its Credential ("AKID/date/region/service/aws4_request"). signed is
// false for a request with neither an Authorization header nor a presigned
// query.
func accessKeyID(r *http.Request) (akid string, signed bool, err error) {
	malformed := func(reason string) (string, bool, error) {
		return "", true, &CallerError{Code: "AuthorizationHeaderMalformed", Reason: reason}
	}
	cred := ""
	if h := r.Header.Get("Authorization"); h != "" {
		params, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
		if !ok {
			return malformed("only AWS Signature Version 4 (AWS4-HMAC-SHA256) is supported")
		}
		for _, p := range strings.Split(params, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "Credential="); ok {
				cred = v
			}
		}
		if cred == "" {
			return malformed("the Authorization header has no Credential")
		}
	} else if v := r.URL.Query().Get("X-Amz-Credential"); v != "" {
		cred = v
	} else {
		return "", false, nil
	}
	akid, _, ok := strings.Cut(cred, "/")
	if !ok || akid == "" {
		return malformed("the Credential is not AKID/date/region/service/aws4_request")
	}
	return akid, true, nil
}
