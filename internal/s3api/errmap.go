package s3api

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// admissionError is a caller or repo this hubproxy's admission rules
// (client-tokens-file, allow-repos, deny-repos) refuse.
type admissionError struct{ err error }

func (e *admissionError) Error() string { return e.err.Error() }
func (e *admissionError) Unwrap() error { return e.err }

// toS3 maps every error the handlers meet to the S3 error clients get: it
// is the only place that does. The core's errors keep their meaning (the
// Hub's refusals stay refusals, its outages stay retryable), in S3's
// vocabulary, which SDKs act on: they retry 500 and 503, never 403 or 404.
func toS3(err error) *Error {
	var (
		e   *Error
		ke  *KeyError
		ae  *AuthError
		adm *admissionError
		ie  *hub.InvalidError
		se  *fetch.StatusError
	)
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &ke):
		return &Error{Code: ke.Code, Message: ke.Error()}
	case errors.As(err, &ae):
		// The Authenticator's refusals carry the status S3 answers each
		// with (RequestTimeTooSkewed is a 403, XAmzContentSHA256Mismatch a
		// 400), which SDKs read to decide whether to re-sign and retry.
		return &Error{Code: ae.Code, Message: ae.Message, Status: ae.Status}
	case errors.As(err, &adm):
		return &Error{Code: "AccessDenied", Message: adm.Error()}
	case errors.As(err, &ie):
		return &Error{Code: "InvalidArgument", Message: ie.Error()}
	case errors.Is(err, fetch.ErrLoop):
		return &Error{Code: "InternalError", Message: "hubproxy's upstream points back at itself: check its upstream setting"}
	case errors.As(err, &se):
		return fromHub(se)
	case errors.Is(err, resolver.ErrOffline):
		return &Error{Code: "ServiceUnavailable", Message: "hubproxy is in offline mode and does not hold this object"}
	case errors.Is(err, resolver.ErrUnverifiable):
		return &Error{Code: "ServiceUnavailable", Message: "the Hub is unreachable and access to this repo cannot be verified"}
	case errors.As(err, new(*cache.VerifyError)):
		return &Error{Code: "InternalError", Message: "the Hub sent content that does not match its hash; it was discarded"}
	case errors.Is(err, cache.ErrUncacheable):
		return &Error{Code: "InternalError", Message: "the Hub gave this file no content hash; it cannot be served in ranges"}
	case errors.As(err, new(*fetch.ProtocolError)), errors.As(err, new(*fetch.RangeError)):
		return &Error{Code: "InternalError", Message: "the Hub sent an invalid response"}
	case errors.Is(err, fetch.ErrUnavailable), errors.Is(err, fetch.ErrStalled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, fetch.ErrLongBody):
		return &Error{Code: "ServiceUnavailable", Message: "the Hub is unavailable"}
	}
	return &Error{Code: "InternalError", Message: "internal error"}
}

// fromHub maps an answer of the Hub's (relayed as a *fetch.StatusError):
// a gated or private repo's 401 and 403 are AccessDenied, whatever is
// missing is NoSuchKey, its throttling is SlowDown and its failures
// ServiceUnavailable, so that SDKs retry exactly what the Hub would let
// succeed later.
func fromHub(se *fetch.StatusError) *Error {
	msg := se.Message
	if msg == "" {
		msg = "the Hub answered " + http.StatusText(se.Code)
	}
	switch {
	case se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden:
		return &Error{Code: "AccessDenied", Message: msg}
	case se.Code == http.StatusNotFound || se.Code == http.StatusGone:
		return &Error{Code: "NoSuchKey", Message: msg}
	case se.Code == http.StatusTooManyRequests:
		return &Error{Code: "SlowDown", Message: msg}
	case se.Code == http.StatusRequestedRangeNotSatisfiable:
		return &Error{Code: "InvalidRange", Message: msg}
	case se.Code >= 500:
		return &Error{Code: "ServiceUnavailable", Message: "the Hub answered " + http.StatusText(se.Code)}
	case se.Code >= 400:
		return &Error{Code: "InvalidArgument", Message: msg}
	}
	return &Error{Code: "InternalError", Message: "internal error"}
}
