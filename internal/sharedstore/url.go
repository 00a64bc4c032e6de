package sharedstore

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/hubproxy/hubproxy/internal/secret"
)

// Location is a parsed shared-store URL.
type Location struct {
	Scheme string // "s3" or "file"

	// s3://BUCKET[/PREFIX]?endpoint=URL&region=R&use_path_style=true
	Bucket    string
	Prefix    string // no leading or trailing '/'; "" for the whole bucket
	Endpoint  string // an S3-compatible server; "" for AWS (or AWS_ENDPOINT_URL_S3)
	Region    string // "" for the AWS configuration's (AWS_REGION, profile)
	PathStyle bool   // bucket in the path, not the host name

	// file:///DIR[?mode=group]
	Dir   string
	Group bool // mode=group: the directory's group shares it (filemode.go)
}

// s3Keys are the query keys an s3:// URL takes: gocloud.dev's s3blob names,
// so a URL written for other Go tools means the same here.
var s3Keys = []string{"endpoint", "region", "use_path_style"}

// ParseURL parses a shared-store URL. The forms, exactly:
//
//	s3://BUCKET[/PREFIX][?endpoint=URL][&region=R][&use_path_style=true]
//	file:///ABSOLUTE/DIR[?mode=group|private]
//
// Credentials never go in the URL: S3 takes them, and its defaults, from the
// standard AWS configuration (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_REGION, AWS_ENDPOINT_URL_S3, shared config files, instance and pod
// roles). Errors are *ConfigError.
func ParseURL(raw string) (Location, error) {
	bad := func(format string, args ...any) (Location, error) {
		return Location{}, &ConfigError{URL: redactRaw(raw), Err: fmt.Errorf(format, args...)}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("not a URL: %v", errors.Unwrap(err))
	}
	switch u.Scheme {
	case "s3":
	case "file":
		return parseFile(u, bad)
	case "gs", "azblob", "gcs", "az":
		return bad("%s:// is not supported by this build (it speaks S3); use s3:// against an S3-compatible endpoint, or file:// on a shared volume", u.Scheme)
	case "":
		return bad("no scheme: write s3://BUCKET[/PREFIX] or file:///DIR")
	default:
		return bad("unknown scheme %q: want s3:// or file://", u.Scheme)
	}
	if u.User != nil {
		return bad("credentials do not go in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or use a pod role)")
	}
	if u.Host == "" {
		return bad("no bucket: write s3://BUCKET[/PREFIX]")
	}
	if u.Port() != "" || strings.ContainsAny(u.Host, "[]") {
		return bad("%q is not a bucket name (the server goes in ?endpoint=URL)", u.Host)
	}
	if u.Fragment != "" {
		return bad("unexpected #%s", u.Fragment)
	}
	loc := Location{Scheme: "s3", Bucket: u.Host}
	if p := strings.Trim(u.Path, "/"); p != "" {
		if path.Clean(p) != p || strings.Contains(p, "..") {
			return bad("prefix %q is not a clean path", p)
		}
		loc.Prefix = p
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("query: %v", err)
	}
	for key, vals := range q {
		if len(vals) != 1 {
			return bad("%s is given %d times", key, len(vals))
		}
		v := vals[0]
		switch key {
		case "endpoint":
			e, err := url.Parse(v)
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				return bad("endpoint %q: want an http(s) URL such as http://minio:9000", redactRaw(v))
			}
			if e.User != nil {
				return bad("credentials do not go in the endpoint; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
			}
			loc.Endpoint = strings.TrimSuffix(v, "/")
		case "region":
			if v == "" {
				return bad("region is empty")
			}
			loc.Region = v
		case "use_path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return bad("use_path_style %q: want true or false", v)
			}
			loc.PathStyle = b
		default:
			return bad("unknown query key %q (known: %s)", key, strings.Join(s3Keys, ", "))
		}
	}
	return loc, nil
}

func parseFile(u *url.URL, bad func(string, ...any) (Location, error)) (Location, error) {
	if u.Host != "" && u.Host != "localhost" {
		return bad("file URLs name a local directory: write file:///DIR (three slashes), not file://%s/...", u.Host)
	}
	if u.Fragment != "" {
		return bad("unexpected #%s", u.Fragment)
	}
	if u.Opaque != "" || !path.IsAbs(u.Path) {
		return bad("want an absolute directory: file:///DIR")
	}
	loc := Location{Scheme: "file", Dir: path.Clean(u.Path)}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("query: %v", err)
	}
	for key, vals := range q {
		if key != "mode" {
			return bad("unknown query key %q: file URLs take only mode=group or mode=private", key)
		}
		if len(vals) != 1 {
			return bad("mode is given %d times", len(vals))
		}
		switch v := vals[0]; v {
		case "private":
		case "group":
			loc.Group = true
		default:
			if m, err := strconv.ParseUint(v, 8, 32); err == nil && m&0o007 != 0 {
				return bad("mode=%s would let other users of the host read stored chunks of gated files; want mode=group (directories 2770, files 0660: the directory's group shares the store) or mode=private (0700, 0600: one user; the default)", v)
			}
			return bad("mode=%s: want mode=group (directories 2770, files 0660) or mode=private (0700, 0600; the default)", v)
		}
	}
	return loc, nil
}

// String writes the location back as a URL. It holds no credentials:
// ParseURL refuses them.
func (l Location) String() string {
	if l.Scheme == "file" {
		if l.Group {
			return "file://" + l.Dir + "?mode=group"
		}
		return "file://" + l.Dir
	}
	s := "s3://" + l.Bucket
	if l.Prefix != "" {
		s += "/" + l.Prefix
	}
	q := url.Values{}
	if l.Endpoint != "" {
		q.Set("endpoint", l.Endpoint)
	}
	if l.Region != "" {
		q.Set("region", l.Region)
	}
	if l.PathStyle {
		q.Set("use_path_style", "true")
	}
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

// redactRaw hides a password in a URL that parses, its own or its
// endpoint's, and keeps the rest.
func redactRaw(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if q, err := url.ParseQuery(u.RawQuery); err == nil && q.Get("endpoint") != "" {
		q.Set("endpoint", redactRaw(q.Get("endpoint")))
		u.RawQuery = q.Encode()
	}
	return secret.URL(u.Redacted()) // and credentials in the query
}
