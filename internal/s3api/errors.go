package s3api

import (
	"encoding/xml"
	"net/http"
)

// errorBody is the S3 error document; clients (the AWS SDKs, boto3) read
// Code to decide retries and surface Message to users.
type errorBody struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
}

// Error is an S3 error answer decided by this package: an unsatisfiable
// range, a write, a bad query parameter. Message is safe to show.
type Error struct {
	Code    string
	Message string
	// ContentRange is Content-Range on the answer: "bytes */size" on an
	// InvalidRange, as S3 sends it.
	ContentRange string
	// Status, when not 0, is the answer's HTTP status, for codes whose
	// status is the deciding party's (an AuthError's); else statusFor(Code).
	Status int
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// statusFor is the HTTP status S3 answers each error code with.
func statusFor(code string) int {
	switch code {
	case "NoSuchBucket", "NoSuchKey":
		return http.StatusNotFound
	case "InvalidArgument", "InvalidRequest", "AuthorizationHeaderMalformed":
		return http.StatusBadRequest
	case "InvalidRange", "InvalidPartNumber":
		return http.StatusRequestedRangeNotSatisfiable
	case "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId":
		return http.StatusForbidden
	case "PreconditionFailed":
		return http.StatusPreconditionFailed
	case "MethodNotAllowed":
		return http.StatusMethodNotAllowed
	case "NotImplemented":
		return http.StatusNotImplemented
	case "SlowDown", "ServiceUnavailable":
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// WriteError answers err as an S3 XML error, mapped by toS3 (errmap.go). An
// error it does not recognise is an InternalError whose detail stays in the
// server's log, not in the client's answer. A HEAD answer has no body, as
// S3's has none.
func WriteError(w http.ResponseWriter, r *http.Request, err error, resource, requestID string) {
	e := toS3(err)
	body := errorBody{Code: e.Code, Message: e.Message, Resource: resource, RequestID: requestID}
	status := e.Status
	if status == 0 {
		status = statusFor(body.Code)
	}
	h := w.Header()
	for _, k := range []string{"Content-Length", "Content-Range", "ETag", "Last-Modified", "Accept-Ranges"} {
		h.Del(k)
	}
	h.Set("Content-Type", "application/xml")
	h.Set("x-amz-request-id", requestID)
	if e.ContentRange != "" {
		h.Set("Content-Range", e.ContentRange)
	}
	if e.Code == "MethodNotAllowed" {
		h.Set("Allow", "GET, HEAD")
	}
	w.WriteHeader(status)
	if r != nil && r.Method == http.MethodHead {
		return
	}
	out, _ := xml.Marshal(body) // a struct of strings always marshals
	_, _ = w.Write(append([]byte(xml.Header), out...))
}
