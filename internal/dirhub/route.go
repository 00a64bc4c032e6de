package dirhub

import (
	"errors"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Routing uses the hub's own URL grammar (hub.ParseFileURL, ParseAPIURL),
// as hubproxy's server does; what dirhub adds is the hub's answers to URLs
// that grammar refuses.

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

// parseRoute parses an escaped URL path. Errors are the hub's answers.
func parseRoute(escaped string) (route, *hubError) {
	if strings.HasPrefix(escaped, "/api/") {
		au, err := hub.ParseAPIURL(escaped)
		if err != nil {
			return route{}, routeError(err)
		}
		rt := route{repo: au.Repo, rev: au.Rev, path: au.Path}
		switch au.Kind {
		case hub.APIInfo:
			rt.kind = routeInfo
		case hub.APITree:
			rt.kind = routeTree
		case hub.APIPathsInfo:
			rt.kind = routePathsInfo
		case hub.APIXetToken:
			rt.kind = routeOther
		default:
			return route{}, errNoRoute()
		}
		if rt.rev == "" {
			rt.rev = "HEAD"
		}
		return rt, nil
	}
	fu, err := hub.ParseFileURL(escaped)
	if err != nil {
		return route{}, routeError(err)
	}
	return route{kind: routeFile, repo: fu.Repo, rev: fu.Rev, path: fu.Path}, nil
}

// routeError answers a URL the grammar refused as the hub would: an id no
// repo can have is RepoNotFound, a bad revision RevisionNotFound, a bad
// path EntryNotFound.
func routeError(err error) *hubError {
	var inv *hub.InvalidError
	if !errors.As(err, &inv) {
		return errNoRoute()
	}
	switch inv.Field {
	case "repo id":
		return errRepoNotFound()
	case "revision":
		return errRevisionNotFound(inv.Value)
	}
	return errEntryNotFound("")
}
