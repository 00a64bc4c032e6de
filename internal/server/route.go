package server

import (
	"net/url"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Routing follows docs/hub-protocol.md §0: work on the *escaped* path, split on the
// literal markers, and only then unescape, so that "refs%2Fpr%2F1" and "%2F" in
// tree sub-paths stay unambiguous. Repo ids are never found by counting
// segments: "gpt2" and "org/name" are both valid.

// fileRoute is a parsed /{prefix}{repo}/{resolve|raw}/{rev}/{path} URL.
type fileRoute struct {
	repo hub.Repo
	raw  bool // /raw/ rather than /resolve/
	rev  string
	path string
}

// errNoRoute means the URL is not one of ours; the caller answers 404.
type noRouteError struct{}

func (noRouteError) Error() string { return "no such route" }

var errNoRoute error = noRouteError{}

// parseFileRoute parses the escaped path of a file URL.
func parseFileRoute(escaped string) (fileRoute, error) {
	p := strings.TrimPrefix(escaped, "/")
	typ := hub.Model
	switch {
	case strings.HasPrefix(p, "datasets/"):
		typ, p = hub.Dataset, strings.TrimPrefix(p, "datasets/")
	case strings.HasPrefix(p, "spaces/"):
		typ, p = hub.Space, strings.TrimPrefix(p, "spaces/")
	}
	var fr fileRoute
	repoEsc, rest, ok := cutFirstMarker(p, "/resolve/", "/raw/", &fr.raw)
	if !ok {
		return fileRoute{}, errNoRoute
	}
	repo, err := parseRepo(typ, repoEsc)
	if err != nil {
		return fileRoute{}, err
	}
	revEsc, pathEsc := hub.SplitRevision(rest)
	rev, err := unescape("revision", revEsc)
	if err != nil {
		return fileRoute{}, err
	}
	if err := hub.ValidRevision(rev); err != nil {
		return fileRoute{}, err
	}
	path, err := unescape("path", pathEsc)
	if err != nil {
		return fileRoute{}, err
	}
	if err := hub.ValidPath(path); err != nil {
		return fileRoute{}, err
	}
	fr.repo, fr.rev, fr.path = repo, rev, path
	return fr, nil
}

// cutFirstMarker splits p at the first of resolve or raw markers.
func cutFirstMarker(p, resolve, raw string, isRaw *bool) (before, after string, ok bool) {
	i, j := strings.Index(p, resolve), strings.Index(p, raw)
	switch {
	case i < 0 && j < 0:
		return "", "", false
	case j >= 0 && (i < 0 || j < i):
		*isRaw = true
		return p[:j], p[j+len(raw):], true
	default:
		return p[:i], p[i+len(resolve):], true
	}
}

func parseRepo(typ hub.RepoType, escaped string) (hub.Repo, error) {
	id, err := unescape("repo id", escaped)
	if err != nil {
		return hub.Repo{}, err
	}
	return hub.ParseRepo(typ, id)
}

func unescape(field, s string) (string, error) {
	u, err := url.PathUnescape(s)
	if err != nil {
		return "", &hub.InvalidError{Field: field, Value: s, Reason: "bad percent-encoding"}
	}
	return u, nil
}

// apiKind is what an /api/{type}s/{repo}/… URL asks for.
type apiKind int

const (
	apiPass      apiKind = iota // anything else: passed through uncached
	apiInfo                     // /api/{t}s/{repo}[/revision/{rev}]
	apiTree                     // /api/{t}s/{repo}/tree/{rev}[/{path}]
	apiPathsInfo                // /api/{t}s/{repo}/paths-info/{rev}
	apiXetToken                 // /api/{t}s/{repo}/xet-read-token/{rev}: always refused
)

type apiRoute struct {
	kind apiKind
	repo hub.Repo
	rev  string // "" for repo info without a revision
	path string // tree sub-path, may be ""
}

var apiMarkers = []struct {
	marker string
	kind   apiKind
}{
	{"/revision/", apiInfo},
	{"/tree/", apiTree},
	{"/paths-info/", apiPathsInfo},
	{"/xet-read-token/", apiXetToken},
}

// parseAPIRoute parses the escaped path of an /api/ URL. Anything it does not
// recognise is apiPass with no error; malformed ids on recognised routes are
// *hub.InvalidError.
func parseAPIRoute(escaped string) (apiRoute, error) {
	p, ok := strings.CutPrefix(escaped, "/api/")
	if !ok {
		return apiRoute{}, errNoRoute
	}
	plural, rest, _ := strings.Cut(p, "/")
	typ, ok := hub.ParseRepoType(plural)
	if !ok || rest == "" {
		return apiRoute{kind: apiPass}, nil
	}
	best, bestKind, bestLen := -1, apiPass, 0
	for _, m := range apiMarkers {
		if i := strings.Index(rest, m.marker); i >= 0 && (best < 0 || i < best) {
			best, bestKind, bestLen = i, m.kind, len(m.marker)
		}
	}
	if best < 0 {
		// Bare repo info: one or two segments and nothing after.
		if strings.Count(rest, "/") > 1 {
			return apiRoute{kind: apiPass}, nil
		}
		repo, err := parseRepo(typ, rest)
		if err != nil {
			return apiRoute{kind: apiPass}, nil
		}
		return apiRoute{kind: apiInfo, repo: repo}, nil
	}
	repo, err := parseRepo(typ, rest[:best])
	if err != nil {
		return apiRoute{}, err
	}
	after := rest[best+bestLen:]
	ar := apiRoute{kind: bestKind, repo: repo}
	revEsc, pathEsc := after, ""
	if bestKind == apiTree {
		revEsc, pathEsc = hub.SplitRevision(after)
	}
	if ar.rev, err = unescape("revision", strings.TrimSuffix(revEsc, "/")); err != nil {
		return apiRoute{}, err
	}
	if err := hub.ValidRevision(ar.rev); err != nil {
		return apiRoute{}, err
	}
	if pathEsc = strings.TrimSuffix(pathEsc, "/"); pathEsc != "" {
		if ar.path, err = unescape("path", pathEsc); err != nil {
			return apiRoute{}, err
		}
		if err := hub.ValidPath(ar.path); err != nil {
			return apiRoute{}, err
		}
	}
	return ar, nil
}
