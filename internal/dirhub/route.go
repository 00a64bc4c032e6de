package dirhub

import (
	"net/url"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Routing follows docs/hub-protocol.md §0, as hubproxy's server does: split the
// escaped path on the literal markers, then unescape, so "refs%2Fpr%2F1" and
// "%2F" in tree sub-paths stay unambiguous.

type routeKind int

const (
	routeFile      routeKind = iota // /{prefix}{repo}/{resolve|raw}/{rev}/{path}
	routeInfo                       // /api/{t}s/{repo}[/revision/{rev}]
	routeTree                       // /api/{t}s/{repo}/tree/{rev}[/{path}]
	routePathsInfo                  // /api/{t}s/{repo}/paths-info/{rev}
	routeOther                      // a recognised repo, but nothing dirhub offers
)

type route struct {
	kind routeKind
	repo hub.Repo
	rev  string // "HEAD" when the URL names none
	path string // file path, or tree sub-path ("" for the root)
}

var apiMarkers = []struct {
	marker string
	kind   routeKind
}{
	{"/revision/", routeInfo},
	{"/tree/", routeTree},
	{"/paths-info/", routePathsInfo},
	{"/xet-read-token/", routeOther},
}

// parseRoute parses an escaped URL path. Errors are the hub's answers.
func parseRoute(escaped string) (route, *hubError) {
	if rest, ok := strings.CutPrefix(escaped, "/api/"); ok {
		return parseAPIRoute(rest)
	}
	p := strings.TrimPrefix(escaped, "/")
	typ := hub.Model
	switch {
	case strings.HasPrefix(p, "datasets/"):
		typ, p = hub.Dataset, strings.TrimPrefix(p, "datasets/")
	case strings.HasPrefix(p, "spaces/"):
		typ, p = hub.Space, strings.TrimPrefix(p, "spaces/")
	}
	i, j := strings.Index(p, "/resolve/"), strings.Index(p, "/raw/")
	var repoEsc, rest string
	switch {
	case i < 0 && j < 0:
		return route{}, errNoRoute()
	case j >= 0 && (i < 0 || j < i):
		repoEsc, rest = p[:j], p[j+len("/raw/"):]
	default:
		repoEsc, rest = p[:i], p[i+len("/resolve/"):]
	}
	rt := route{kind: routeFile}
	var herr *hubError
	if rt.repo, herr = parseRepo(typ, repoEsc); herr != nil {
		return route{}, herr
	}
	revEsc, pathEsc := hub.SplitRevision(rest)
	if rt.rev, herr = parseRevision(revEsc); herr != nil {
		return route{}, herr
	}
	path, err := url.PathUnescape(pathEsc)
	if err != nil || hub.ValidPath(path) != nil {
		return route{}, errEntryNotFound("")
	}
	rt.path = path
	return rt, nil
}

func parseAPIRoute(rest string) (route, *hubError) {
	plural, after, _ := strings.Cut(rest, "/")
	typ, ok := hub.ParseRepoType(plural)
	if !ok || after == "" {
		return route{}, errNoRoute()
	}
	at, kind, mlen := -1, routeInfo, 0
	for _, m := range apiMarkers {
		if i := strings.Index(after, m.marker); i >= 0 && (at < 0 || i < at) {
			at, kind, mlen = i, m.kind, len(m.marker)
		}
	}
	repoEsc, tail := after, ""
	if at >= 0 {
		repoEsc, tail = after[:at], after[at+mlen:]
	} else if strings.Count(after, "/") > 1 {
		return route{}, errNoRoute()
	}
	rt := route{kind: kind, rev: "HEAD"}
	var herr *hubError
	if rt.repo, herr = parseRepo(typ, repoEsc); herr != nil {
		return route{}, herr
	}
	if at < 0 {
		return rt, nil
	}
	revEsc, pathEsc := strings.TrimSuffix(tail, "/"), ""
	if kind == routeTree {
		revEsc, pathEsc = hub.SplitRevision(tail)
	}
	if rt.rev, herr = parseRevision(revEsc); herr != nil {
		return route{}, herr
	}
	if pathEsc = strings.Trim(pathEsc, "/"); pathEsc != "" {
		path, err := url.PathUnescape(pathEsc)
		if err != nil || hub.ValidPath(path) != nil {
			return route{}, errEntryNotFound("")
		}
		rt.path = path
	}
	return rt, nil
}

func parseRepo(typ hub.RepoType, escaped string) (hub.Repo, *hubError) {
	id, err := url.PathUnescape(escaped)
	if err != nil {
		return hub.Repo{}, errRepoNotFound()
	}
	repo, err := hub.ParseRepo(typ, id)
	if err != nil {
		return hub.Repo{}, errRepoNotFound()
	}
	return repo, nil
}

func parseRevision(escaped string) (string, *hubError) {
	rev, err := url.PathUnescape(escaped)
	if err != nil || hub.ValidRevision(rev) != nil {
		return "", errRevisionNotFound(escaped)
	}
	return rev, nil
}
