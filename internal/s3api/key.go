// Package s3api maps the S3 read API's names onto the Hub's: buckets onto
// repo types and object keys onto (repo, revision, path). It holds no policy:
// what it parses is handed to the same core the hub routes use.
package s3api

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// DefaultRevision is the revision a key without "@rev" names, as the Hub's
// own default branch is named in huggingface_hub.
const DefaultRevision = "main"

// KeyError reports a bucket or key that names no file in a repo. Its message
// is safe to show to clients; Code is the S3 error code to answer with.
type KeyError struct {
	Code   string // "NoSuchBucket", "InvalidArgument", "NoSuchKey"
	Value  string
	Reason string
}

func (e *KeyError) Error() string { return fmt.Sprintf("%s %q: %s", e.Code, e.Value, e.Reason) }

// ParseBucket maps a bucket name to the repo type it serves. Only models and
// datasets are exposed: spaces hold apps, not weights or data.
func ParseBucket(bucket string) (hub.RepoType, error) {
	switch bucket {
	case "models":
		return hub.Model, nil
	case "datasets":
		return hub.Dataset, nil
	}
	return "", &KeyError{Code: "NoSuchBucket", Value: bucket, Reason: "buckets are models and datasets"}
}

// Location is one file in one repo at one revision, as an object key names it.
type Location struct {
	Repo     hub.Repo
	Revision string // DefaultRevision unless the key said "@rev"
	Path     string // validated by hub.ValidPath
}

// ParseKey splits an object key "{org}/{name}/{path}" or
// "{org}/{name}@{rev}/{path}" (rev percent-encoded when it holds '/', as
// refs/pr/1 does). The repo id always takes two segments: a legacy one-segment
// id ("gpt2") cannot be told apart from "{org}/{name}" and is not reachable
// here. Every part goes through the hub package's validators, so a key that
// the hub routes would refuse is refused here too.
func ParseKey(t hub.RepoType, key string) (Location, error) {
	bad := func(reason string) (Location, error) {
		return Location{}, &KeyError{Code: "InvalidArgument", Value: key, Reason: reason}
	}
	org, rest, ok := strings.Cut(key, "/")
	if !ok {
		return bad("keys are {org}/{name}[@revision]/{path}")
	}
	nameRev, path, ok := strings.Cut(rest, "/")
	if !ok || path == "" {
		return bad("key names a repo, not a file in it")
	}
	name, rev, hasRev := strings.Cut(nameRev, "@")
	if !hasRev {
		rev = DefaultRevision
	} else {
		dec, err := url.PathUnescape(rev)
		if err != nil {
			return bad("revision is not valid percent-encoding")
		}
		rev = dec
	}
	repo, err := hub.ParseRepo(t, org+"/"+name)
	if err != nil {
		return bad(err.Error())
	}
	if err := hub.ValidRevision(rev); err != nil {
		return bad(err.Error())
	}
	if err := hub.ValidPath(path); err != nil {
		return bad(err.Error())
	}
	return Location{Repo: repo, Revision: rev, Path: path}, nil
}
