package s3api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/repoapi"
	"github.com/hubproxy/hubproxy/internal/repofs"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// Files opens repo files for a caller: internal/repofs, the same core the
// hub's /resolve/ routes read through, so an object's bytes come from the
// same cache, lazy fills and shared store.
type Files interface {
	Stat(ctx context.Context, c hub.Caller, f hub.FileRef) (resolver.Meta, error)
	Open(ctx context.Context, c hub.Caller, f hub.FileRef) (*repofs.File, error)
}

// API answers the Hub's JSON API for a caller (internal/repoapi): listings
// are its tree pages and revisions its repo info, cached per caller as the
// hub's /api/ routes cache them.
type API interface {
	Do(ctx context.Context, req repoapi.Request) (*repoapi.Response, error)
}

// Admission is the hub routes' admission (internal/server.Admission):
// client-tokens-file and the allow/deny repo patterns, applied here to the
// caller an S3 request's credentials name.
type Admission interface {
	Caller(c hub.Caller) error
	Repo(repo hub.Repo) error
}

// CallerAuth names the caller of an S3 request: an *Authenticator in
// production, which verifies SigV4 signatures it holds the secret of. A
// refusal is an *AuthError (or an *Error), which toS3 answers with its code
// and status; anything else is an InternalError. Only the hub.Caller it
// returns goes on: the request's own Authorization header or presigned
// query never reaches the core, so never the Hub.
type CallerAuth interface {
	Caller(r *http.Request) (hub.Caller, error)
}

// Options configures the handler; Files and API are required.
type Options struct {
	Files Files
	API   API
	// Admission narrows who may read what, as on the hub routes; nil
	// admits everything (the Hub still decides each caller's access).
	Admission Admission
	// Auth names callers; nil is an Authenticator without a credentials
	// file: anonymous, Bearer and Hub-token (hf_…) access keys only.
	Auth CallerAuth
	// Region is what GetBucketLocation and HeadBucket report; "" is
	// us-east-1, the region SDKs sign for when told none.
	Region string
	Logger *slog.Logger
}

// Handler serves the read-only, path-style S3 API: buckets "models" and
// "datasets", keys "{org}/{name}[@rev]/{path}". Immutable after New.
type Handler struct {
	opts  Options
	log   *slog.Logger
	dates commitDates
}

// New returns the S3 API's handler.
func New(opts Options) *Handler {
	if opts.Auth == nil {
		opts.Auth = &Authenticator{now: time.Now}
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{opts: opts, log: log}
}

// writeSubresources are the bucket and object subresources of S3's other
// operations (configuration, ACLs, multipart uploads, versions): none is
// served, whatever the method, rather than be mistaken for a listing or a
// read of the object.
var writeSubresources = []string{
	"acl", "policy", "policyStatus", "tagging", "uploads", "uploadId", "versions", "versionId",
	"versioning", "lifecycle", "cors", "website", "logging", "notification", "replication", "encryption",
	"object-lock", "retention", "legal-hold", "torrent", "attributes", "restore", "select", "delete",
	"requestPayment", "accelerate", "analytics", "inventory", "metrics", "intelligent-tiering",
	"ownershipControls", "publicAccessBlock", "session", "renameObject",
}

// request is one S3 request as the handlers need it.
type request struct {
	r        *http.Request
	id       string // x-amz-request-id
	resource string // the escaped path, for error bodies
	caller   hub.Caller
	query    url.Values
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q, qerr := url.ParseQuery(r.URL.RawQuery)
	req := &request{r: r, id: requestID(w), resource: r.URL.EscapedPath(), query: q}
	w.Header().Set("x-amz-request-id", req.id)
	fail := func(err error) {
		if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
			return // the client is gone
		}
		if e := toS3(err); e.Code == "InternalError" || e.Code == "ServiceUnavailable" {
			h.log.Warn("S3 request failed", "id", req.id, "method", r.Method, "path", req.resource, "err", err)
		}
		WriteError(w, r, err, req.resource, req.id)
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPut, http.MethodPost, http.MethodDelete:
		fail(&Error{Code: "NotImplemented", Message: "hubproxy's S3 API is read-only: " + r.Method + " is not implemented"})
		return
	default:
		fail(&Error{Code: "MethodNotAllowed", Message: "the specified method is not allowed against this resource"})
		return
	}
	if qerr != nil {
		fail(&Error{Code: "InvalidArgument", Message: "the query string is not valid URL encoding"})
		return
	}
	for _, sub := range writeSubresources {
		if q.Has(sub) {
			fail(&Error{Code: "NotImplemented", Message: "hubproxy's S3 API serves reads only; ?" + sub + " is not implemented"})
			return
		}
	}
	c, err := h.opts.Auth.Caller(r)
	if err != nil {
		fail(err)
		return
	}
	if h.opts.Admission != nil {
		if err := h.opts.Admission.Caller(c); err != nil {
			fail(&admissionError{err})
			return
		}
	}
	req.caller = c
	// The decoded path: a key's own '%' arrives as "%25" and a revision's
	// "%2F" (as in "@refs%2Fpr%2F1") as "%252F", so decoding once gives the
	// key as the client named it. ParseKey refuses dot segments and empty
	// ones, so no cleaning is needed or wanted.
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case bucket == "":
		err = h.listBuckets(w, req)
	case key == "":
		err = h.serveBucket(w, req, bucket)
	default:
		err = h.serveObject(w, req, bucket, key)
	}
	if err != nil {
		fail(err)
	}
}

// admit applies the repo patterns to repo.
func (h *Handler) admit(repo hub.Repo) error {
	if h.opts.Admission == nil {
		return nil
	}
	if err := h.opts.Admission.Repo(repo); err != nil {
		return &admissionError{err}
	}
	return nil
}

// requestID is the id the hub server's middleware gave the request
// (X-Request-Id), so a log line and the client's x-amz-request-id match;
// else a fresh one.
func requestID(w http.ResponseWriter) string {
	if id := w.Header().Get("X-Request-Id"); id != "" {
		return id
	}
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// xmlNS is the S3 API's XML namespace; SDKs accept answers without it, but
// some strict parsers (and S3's own) set it.
const xmlNS = "http://s3.amazonaws.com/doc/2006-03-01/"

// bucketsCreated is every bucket's CreationDate: the buckets are fixed
// names for repo types, made by no one at any time, and a stable value
// keeps ListBuckets identical across requests and nodes.
var bucketsCreated = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

type listBucketsResult struct {
	XMLName xml.Name `xml:"ListAllMyBucketsResult"`
	NS      string   `xml:"xmlns,attr"`
	Owner   owner    `xml:"Owner"`
	Buckets []bucket `xml:"Buckets>Bucket"`
}

type owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

type bucket struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
}

func (h *Handler) listBuckets(w http.ResponseWriter, req *request) error {
	out := listBucketsResult{NS: xmlNS, Owner: owner{ID: "hubproxy", DisplayName: "hubproxy"}}
	for _, name := range []string{"datasets", "models"} {
		out.Buckets = append(out.Buckets, bucket{Name: name, CreationDate: s3Time(bucketsCreated)})
	}
	return writeXML(w, req.r, out)
}

type locationResult struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	NS      string   `xml:"xmlns,attr"`
	Region  string   `xml:",chardata"`
}

// serveBucket answers HeadBucket, GetBucketLocation and the listings.
func (h *Handler) serveBucket(w http.ResponseWriter, req *request, name string) error {
	typ, err := ParseBucket(name)
	if err != nil {
		return err
	}
	w.Header().Set("x-amz-bucket-region", h.opts.Region)
	switch {
	case req.r.Method == http.MethodHead:
		w.WriteHeader(http.StatusOK)
		return nil
	case req.query.Has("location"):
		region := h.opts.Region
		if region == "us-east-1" {
			region = "" // S3 answers us-east-1 as an empty constraint
		}
		return writeXML(w, req.r, locationResult{NS: xmlNS, Region: region})
	}
	return h.list(w, req, name, typ)
}

// writeXML answers 200 with v as an XML document.
func writeXML(w http.ResponseWriter, r *http.Request, v any) error {
	out, err := xml.Marshal(v)
	if err != nil {
		return err
	}
	body := append([]byte(xml.Header), out...)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", itoa(int64(len(body))))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
	return nil
}

// s3Time is a time as S3's XML writes it.
func s3Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
