package s3api

import (
	"encoding/xml"
	"errors"
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

// statusFor is the HTTP status S3 answers each error code with.
func statusFor(code string) int {
	switch code {
	case "NoSuchBucket", "NoSuchKey":
		return http.StatusNotFound
	case "InvalidArgument":
		return http.StatusBadRequest
	case "InvalidRange":
		return http.StatusRequestedRangeNotSatisfiable
	case "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId":
		return http.StatusForbidden
	case "NotImplemented":
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

// WriteError answers err as an S3 XML error. A *KeyError keeps its code;
// anything else is an InternalError whose detail stays in the server's log,
// not in the client's answer.
func WriteError(w http.ResponseWriter, err error, resource, requestID string) {
	body := errorBody{Code: "InternalError", Message: "internal error", Resource: resource, RequestID: requestID}
	var ke *KeyError
	if errors.As(err, &ke) {
		body.Code, body.Message = ke.Code, ke.Error()
	}
	status := statusFor(body.Code)
	out, _ := xml.Marshal(body) // a struct of strings always marshals
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-amz-request-id", requestID)
	w.WriteHeader(status)
	_, _ = w.Write(append([]byte(xml.Header), out...))
}
