package s3api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// Every kind of core error maps to the S3 code SDKs act on rightly: the
// Hub's refusals are final (403/404), its outages retryable (503), and
// what hubproxy does not recognise an InternalError that shows nothing of
// the cause.
func TestToS3(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("resolving org/m: %w", err) }
	for _, c := range []struct {
		err  error
		code string
	}{
		{&fetch.StatusError{Code: 401, ErrorCode: "GatedRepo"}, "AccessDenied"},
		{&fetch.StatusError{Code: 403, ErrorCode: "GatedRepo"}, "AccessDenied"},
		{&fetch.StatusError{Code: 401, ErrorCode: "RepoNotFound"}, "AccessDenied"},
		{&fetch.StatusError{Code: 404, ErrorCode: "EntryNotFound"}, "NoSuchKey"},
		{&fetch.StatusError{Code: 404, ErrorCode: "RevisionNotFound"}, "NoSuchKey"},
		{&fetch.StatusError{Code: 429}, "SlowDown"},
		{&fetch.StatusError{Code: 502}, "ServiceUnavailable"},
		{&fetch.StatusError{Code: 400}, "InvalidArgument"},
		{&admissionError{errors.New("this hubproxy does not serve org/m")}, "AccessDenied"},
		{&hub.InvalidError{Field: "path", Value: "..", Reason: "dot segment"}, "InvalidArgument"},
		{resolver.ErrOffline, "ServiceUnavailable"},
		{resolver.ErrUnverifiable, "ServiceUnavailable"},
		{fetch.ErrUnavailable, "ServiceUnavailable"},
		{fetch.ErrStalled, "ServiceUnavailable"},
		{context.DeadlineExceeded, "ServiceUnavailable"},
		{io.ErrUnexpectedEOF, "ServiceUnavailable"},
		{&cache.VerifyError{ETag: "a", Got: "b"}, "InternalError"},
		{cache.ErrUncacheable, "InternalError"},
		{&fetch.ProtocolError{URL: "u", Reason: "r"}, "InternalError"},
		{fetch.ErrLoop, "InternalError"},
		{authErr("InvalidAccessKeyId", http.StatusForbidden, "r"), "InvalidAccessKeyId"},
		{authErr("SignatureDoesNotMatch", http.StatusForbidden, "r"), "SignatureDoesNotMatch"},
		{&Error{Code: "InvalidRange", Message: "m"}, "InvalidRange"},
		{errors.New("open /var/cache/hubproxy/secret: permission denied"), "InternalError"},
	} {
		for _, err := range []error{c.err, wrap(c.err)} {
			got := toS3(err)
			if got.Code != c.code {
				t.Errorf("%v: %s; want %s", err, got.Code, c.code)
			}
			if got.Code == "InternalError" && strings.Contains(got.Message, "/var/cache") {
				t.Errorf("%v: message %q shows the cause", err, got.Message)
			}
			if statusFor(got.Code) == http.StatusInternalServerError && got.Code != "InternalError" {
				t.Errorf("%s has no status of its own", got.Code)
			}
		}
	}
}
