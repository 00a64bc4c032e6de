package s3api

import (
	"encoding/base64"
	"encoding/xml"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// maxKeys is the most entries one listing page holds, as in S3, which
// caps a larger max-keys to it rather than refuse it.
const maxKeys = 1000

// scope is the repo a listing's prefix names, and where in it to look.
type scope struct {
	repo     hub.Repo
	rev      string
	repoPart string // "{org}/{name}[@rev]/", as the prefix spells it: every key listed starts with it
	dir      string // the folder to ask the Hub's tree for: the prefix's path up to its last '/'
}

// parseScope reads a listing's prefix. It must name one repo
// ("{org}/{name}" at least): a bucket holds every repo of the Hub, which
// cannot be listed. "{org}/{name}" without the slash is taken as the repo
// whole, so `aws s3 ls s3://models/org/name` shows its folder.
func parseScope(t hub.RepoType, prefix string) (scope, error) {
	bad := func(reason string) (scope, error) {
		return scope{}, &KeyError{Code: "InvalidArgument", Value: prefix, Reason: reason}
	}
	org, rest, ok := strings.Cut(prefix, "/")
	if !ok || org == "" || rest == "" || strings.HasPrefix(rest, "/") {
		return bad("a listing's prefix must name a repo: {org}/{name}[@revision]/")
	}
	nameRev, path, _ := strings.Cut(rest, "/")
	repoPart := org + "/" + nameRev + "/"
	// ParseKey validates the repo and revision exactly as object keys are.
	loc, err := ParseKey(t, repoPart+"x")
	if err != nil {
		return scope{}, err
	}
	sc := scope{repo: loc.Repo, rev: loc.Revision, repoPart: repoPart}
	if i := strings.LastIndexByte(path, '/'); i > 0 {
		sc.dir = path[:i]
		if err := hub.ValidPath(sc.dir); err != nil {
			return bad(err.Error())
		}
	} else if i == 0 {
		return bad("a path has no empty segments")
	}
	return sc, nil
}

// listParams are a listing's query parameters, checked.
type listParams struct {
	v2        bool
	prefix    string
	delimiter string
	after     string // start-after (v2) or marker (v1), or the continuation token's position
	token     string // the continuation token as sent (v2)
	commit    string // the commit the continuation token pins
	max       int
	url       bool // encoding-type=url
}

func parseListParams(q url.Values) (listParams, error) {
	bad := func(msg string) (listParams, error) {
		return listParams{}, &Error{Code: "InvalidArgument", Message: msg}
	}
	p := listParams{v2: q.Get("list-type") == "2", prefix: q.Get("prefix"), delimiter: q.Get("delimiter"), max: maxKeys}
	if lt := q.Get("list-type"); lt != "" && lt != "2" {
		return bad("list-type must be 2, or absent for ListObjects")
	}
	switch q.Get("encoding-type") {
	case "":
	case "url":
		p.url = true
	default:
		return bad("encoding-type must be url")
	}
	if s := q.Get("max-keys"); s != "" {
		n, err := strconv.ParseUint(s, 10, 63)
		if err != nil {
			var ne *strconv.NumError
			if !errors.As(err, &ne) || ne.Err != strconv.ErrRange {
				return bad("max-keys must be a non-negative integer")
			}
			n = maxKeys // a number past int64 is still just "many"
		}
		p.max = int(min(n, maxKeys))
	}
	if p.v2 {
		p.after = q.Get("start-after")
		if p.token = q.Get("continuation-token"); p.token != "" {
			raw, err := base64.RawURLEncoding.DecodeString(p.token)
			commit, after, ok := strings.Cut(string(raw), ":")
			if err != nil || !ok || !hub.IsCommit(commit) {
				return bad("the continuation token provided is incorrect")
			}
			p.commit, p.after = commit, after
		}
	} else {
		p.after = q.Get("marker")
	}
	return p, nil
}

// token is the continuation token resuming after item at commit: the
// commit is in it so that every page of one listing reads one tree, even
// while the branch moves.
func token(commit, item string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(commit + ":" + item))
}

// listed is one page of a listing.
type listed struct {
	objects   []object // path is the whole key here
	prefixes  []string
	truncated bool
	last      string // the last key or common prefix on the page
}

// paginate is S3's listing of objs (sorted by path, keys repoPart+path):
// the keys after after that start with prefix, those holding delimiter
// past the prefix rolled up into common prefixes, max entries (keys and
// prefixes together) at most.
func paginate(objs []object, repoPart string, p listParams) listed {
	var out listed
	if p.max == 0 {
		return out
	}
	lastCP := ""
	for _, o := range objs {
		key := repoPart + o.path
		if key <= p.after || !strings.HasPrefix(key, p.prefix) {
			continue
		}
		cp := ""
		if p.delimiter != "" {
			if i := strings.Index(key[len(p.prefix):], p.delimiter); i >= 0 {
				cp = key[:len(p.prefix)+i+len(p.delimiter)]
				if cp == lastCP || cp == p.after {
					continue // rolled up already, here or on the page before
				}
			}
		}
		if len(out.objects)+len(out.prefixes) == p.max {
			out.truncated = true
			break
		}
		if cp != "" {
			out.prefixes = append(out.prefixes, cp)
			lastCP, out.last = cp, cp
			continue
		}
		o.path = key
		out.objects = append(out.objects, o)
		out.last = key
	}
	return out
}

type listResult struct {
	XMLName               xml.Name       `xml:"ListBucketResult"`
	NS                    string         `xml:"xmlns,attr"`
	Name                  string         `xml:"Name"`
	Prefix                string         `xml:"Prefix"`
	Marker                *string        `xml:"Marker"`
	NextMarker            string         `xml:"NextMarker,omitempty"`
	StartAfter            string         `xml:"StartAfter,omitempty"`
	ContinuationToken     string         `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string         `xml:"NextContinuationToken,omitempty"`
	KeyCount              *int           `xml:"KeyCount"`
	MaxKeys               int            `xml:"MaxKeys"`
	Delimiter             string         `xml:"Delimiter,omitempty"`
	EncodingType          string         `xml:"EncodingType,omitempty"`
	IsTruncated           bool           `xml:"IsTruncated"`
	Contents              []contentEntry `xml:"Contents"`
	CommonPrefixes        []commonPrefix `xml:"CommonPrefixes"`
}

type contentEntry struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
}

type commonPrefix struct {
	Prefix string `xml:"Prefix"`
}

// list answers ListObjectsV2 and ListObjects over the Hub's tree of the
// repo the prefix names, at the commit its revision resolves to (once per
// listing: a continuation token carries it).
func (h *Handler) list(w http.ResponseWriter, req *request, bucket string, t hub.RepoType) error {
	p, err := parseListParams(req.query)
	if err != nil {
		return err
	}
	sc, err := parseScope(t, p.prefix)
	if err != nil {
		return err
	}
	if err := h.admit(sc.repo); err != nil {
		return err
	}
	ctx := req.r.Context()
	rev, pinned := sc.rev, false
	if p.commit != "" {
		rev, pinned = p.commit, true
	}
	var objs []object
	at, err := h.revisionOf(ctx, req.caller, sc.repo, rev)
	var se *fetch.StatusError
	switch {
	case errors.As(err, &se) && se.Code == http.StatusNotFound && !pinned:
		// No such repo or revision: a prefix naming nothing, listed empty.
	case err != nil:
		return err
	default:
		if objs, err = h.tree(ctx, req.caller, sc.repo, at.commit, sc.dir); err != nil {
			return err
		}
	}
	slices.SortFunc(objs, func(a, b object) int { return strings.Compare(a.path, b.path) })
	page := paginate(objs, sc.repoPart, p)

	enc := func(s string) string { return s }
	if p.url {
		enc = func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "%2F", "/") }
	}
	out := listResult{NS: xmlNS, Name: bucket, Prefix: enc(p.prefix), MaxKeys: p.max, Delimiter: enc(p.delimiter), IsTruncated: page.truncated}
	if p.url {
		out.EncodingType = "url"
	}
	if p.v2 {
		n := len(page.objects) + len(page.prefixes)
		out.KeyCount = &n
		out.ContinuationToken = p.token
		if p.token == "" {
			out.StartAfter = enc(p.after)
		}
		if page.truncated {
			out.NextContinuationToken = token(at.commit, page.last)
		}
	} else {
		m := enc(p.after)
		out.Marker = &m
		if page.truncated {
			out.NextMarker = enc(page.last)
		}
	}
	modified := s3Time(lastModified(at.date))
	for _, o := range page.objects {
		out.Contents = append(out.Contents, contentEntry{Key: enc(o.path), LastModified: modified, ETag: `"` + o.etag + `"`, Size: o.size, StorageClass: "STANDARD"})
	}
	for _, cp := range page.prefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, commonPrefix{Prefix: enc(cp)})
	}
	return writeXML(w, req.r, out)
}

// lastModified is an object's LastModified: its commit's date, the same in
// listings, HEAD and GET and for as long as the commit is. A Hub that gives
// no date gets bucketsCreated, which is as stable.
func lastModified(commitDate time.Time) time.Time {
	if commitDate.IsZero() {
		return bucketsCreated
	}
	return commitDate.UTC().Truncate(time.Second)
}
