package s3api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/repoapi"
)

// maxTreePages bounds the tree pages one listing reads: a Hub page holds
// 1,000 entries, so this is a million files, more than any repo has, and a
// next link that never ends cannot hold a request forever.
const maxTreePages = 1000

// object is one file of a repo's tree, as listings and reads report it.
type object struct {
	path string
	size int64
	etag string // the content hash the resolver reports too: LFS sha256, else the git blob id
}

// revision is what a repo's info says of one revision: the commit it is,
// and that commit's date, which is every object's LastModified.
type revision struct {
	commit string
	date   time.Time
}

// apiRepoPath is "/api/{type}s/{org}/{name}", escaped.
func apiRepoPath(repo hub.Repo) string {
	org, name, _ := strings.Cut(repo.ID(), "/")
	p := "/api/" + repo.Type().Plural() + "/" + url.PathEscape(org)
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

// apiGet asks the API service, as the hub's /api/ routes do for a client,
// and returns the body of a 200; anything else is the Hub's answer as a
// *fetch.StatusError.
func (h *Handler) apiGet(ctx context.Context, c hub.Caller, pathAndQuery string) (body []byte, link string, err error) {
	esc, _, _ := strings.Cut(pathAndQuery, "?")
	au, err := hub.ParseAPIURL(esc)
	if err != nil {
		return nil, "", err
	}
	// PublicBase "": the next link is rewritten to a path on the proxy's
	// root, exactly the pathAndQuery to ask for next.
	resp, err := h.opts.API.Do(ctx, repoapi.Request{URL: au, Method: http.MethodGet, PathAndQuery: pathAndQuery, Caller: c})
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, repoapi.MaxResponseBody+1))
	if err != nil {
		return nil, "", fmt.Errorf("reading the Hub's answer: %w", fetch.ErrUnavailable)
	}
	if resp.Status != http.StatusOK {
		return nil, "", &fetch.StatusError{Code: resp.Status, ErrorCode: resp.Header.Get("X-Error-Code"), Message: resp.Header.Get("X-Error-Message")}
	}
	return body, resp.Header.Get("Link"), nil
}

// revisionOf resolves rev (a branch, tag or commit) of repo for caller c
// from the repo's info, which the API service caches per caller and
// revision; asked with the commit itself, the answer never changes.
func (h *Handler) revisionOf(ctx context.Context, c hub.Caller, repo hub.Repo, rev string) (revision, error) {
	body, _, err := h.apiGet(ctx, c, apiRepoPath(repo)+"/revision/"+url.PathEscape(rev)+"?expand=sha&expand=lastModified")
	if err != nil {
		return revision{}, err
	}
	var info struct {
		SHA          string `json:"sha"`
		LastModified string `json:"lastModified"`
	}
	if err := json.Unmarshal(body, &info); err != nil || !hub.IsCommit(info.SHA) {
		return revision{}, &fetch.ProtocolError{URL: apiRepoPath(repo), Reason: "repo info without a commit sha"}
	}
	date, err := time.Parse(time.RFC3339, info.LastModified)
	if err != nil {
		date = time.Time{} // LastModified is then the stable fallback (lastModified)
	}
	return revision{commit: info.SHA, date: date}, nil
}

// treeEntry is one entry of the Hub's tree listing.
type treeEntry struct {
	Type string `json:"type"`
	OID  string `json:"oid"`
	Size int64  `json:"size"`
	Path string `json:"path"`
	LFS  *struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs"`
}

// tree lists every file under dir ("" for the root) of repo at commit,
// recursively, through every page the Hub's Link headers name. A dir that
// does not exist is an empty list, as a prefix naming nothing is in S3.
func (h *Handler) tree(ctx context.Context, c hub.Caller, repo hub.Repo, commit, dir string) ([]object, error) {
	next := apiRepoPath(repo) + "/tree/" + commit
	if dir != "" {
		next += "/" + escapePath(dir)
	}
	next += "?recursive=true"
	var out []object
	for page := 0; next != ""; page++ {
		if page == maxTreePages {
			return nil, &fetch.ProtocolError{URL: apiRepoPath(repo), Reason: "tree listing did not end"}
		}
		body, link, err := h.apiGet(ctx, c, next)
		var se *fetch.StatusError
		if page == 0 && errors.As(err, &se) && se.Code == http.StatusNotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var entries []treeEntry
		if err := json.Unmarshal(body, &entries); err != nil {
			return nil, &fetch.ProtocolError{URL: apiRepoPath(repo), Reason: "tree page is not a JSON list"}
		}
		for _, e := range entries {
			if e.Type != "file" {
				continue
			}
			o := object{path: e.Path, size: e.Size, etag: e.OID}
			if e.LFS != nil {
				o.size, o.etag = e.LFS.Size, e.LFS.OID
			}
			out = append(out, o)
		}
		if next, err = nextLink(link); err != nil {
			return nil, &fetch.ProtocolError{URL: apiRepoPath(repo), Reason: err.Error()}
		}
	}
	return out, nil
}

// nextLink is the path and query of a Link header's rel="next" target, as
// the API service rewrote it onto the proxy's root; "" when there is none.
func nextLink(header string) (string, error) {
	for _, l := range strings.Split(header, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(l), ">")
		if !ok || !strings.HasPrefix(target, "<") || !strings.Contains(params, `rel="next"`) {
			continue
		}
		target = target[1:]
		if !strings.HasPrefix(target, "/api/") {
			return "", fmt.Errorf("tree next link %q is not on the Hub", target)
		}
		return target, nil
	}
	return "", nil
}

// escapePath escapes each segment of a repo path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
