package s3api

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

func TestWriteError(t *testing.T) {
	_, keyErr := ParseKey(hub.Model, "org/m/../x")
	_, bucketErr := ParseBucket("spaces")
	cases := []struct {
		err        error
		code       string
		status     int
		leaksCause bool
	}{
		{keyErr, "InvalidArgument", http.StatusBadRequest, true},
		{bucketErr, "NoSuchBucket", http.StatusNotFound, true},
		{errors.New("disk /var/cache/secret full"), "InternalError", http.StatusInternalServerError, false},
		// An AuthError's status is its own, even for codes statusFor
		// does not know.
		{authErr("RequestTimeTooSkewed", http.StatusForbidden, "the difference is too large"), "RequestTimeTooSkewed", http.StatusForbidden, true},
		{authErr("XAmzContentSHA256Mismatch", http.StatusBadRequest, "mismatch"), "XAmzContentSHA256Mismatch", http.StatusBadRequest, true},
		{fmt.Errorf("s3: %w", authErr("SignatureDoesNotMatch", http.StatusForbidden, "no match")), "SignatureDoesNotMatch", http.StatusForbidden, true},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		WriteError(rec, httptest.NewRequest(http.MethodGet, "/models/org/m/x", nil), c.err, "/models/org/m/x", "req-1")
		if rec.Code != c.status {
			t.Errorf("%v: status %d, want %d", c.err, rec.Code, c.status)
		}
		if got := rec.Header().Get("x-amz-request-id"); got != "req-1" {
			t.Errorf("x-amz-request-id = %q", got)
		}
		var body errorBody
		if err := xml.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q: %v", rec.Body, err)
		}
		if body.Code != c.code || body.RequestID != "req-1" || body.Resource != "/models/org/m/x" {
			t.Errorf("body = %+v, want code %s", body, c.code)
		}
		if !c.leaksCause && strings.Contains(rec.Body.String(), "secret") {
			t.Errorf("internal detail leaked to client: %s", rec.Body)
		}
	}
}
