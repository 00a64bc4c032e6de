package hub

import (
	"errors"
	"net/url"
	"strings"
)

// The hub's URL grammar (docs/hub-protocol.md §0), parsed once for every
// package that serves it: work on the *escaped* path, split on the literal
// markers, and only then unescape, so that "refs%2Fpr%2F1" and "%2F" in tree
// sub-paths stay unambiguous. Repo ids are never found by counting
// segments: "gpt2" and "org/name" are both valid.

// ErrNoRoute means a path is not one of the hub's file or API URLs.
var ErrNoRoute = errors.New("no such route")

// FileURL is a parsed /{prefix}{repo}/{resolve|raw}/{rev}/{path} URL.
type FileURL struct {
	Repo Repo
	Raw  bool // /raw/ rather than /resolve/
	Rev  string
	Path string
}

// ParseFileURL parses the escaped path of a file URL. Errors: ErrNoRoute,
// or *InvalidError naming the "repo id", "revision" or "path" at fault.
func ParseFileURL(escaped string) (FileURL, error) {
	p := strings.TrimPrefix(escaped, "/")
	typ := Model
	switch {
	case strings.HasPrefix(p, "datasets/"):
		typ, p = Dataset, strings.TrimPrefix(p, "datasets/")
	case strings.HasPrefix(p, "spaces/"):
		typ, p = Space, strings.TrimPrefix(p, "spaces/")
	}
	var fu FileURL
	i, j := strings.Index(p, "/resolve/"), strings.Index(p, "/raw/")
	var repoEsc, rest string
	switch {
	case i < 0 && j < 0:
		return FileURL{}, ErrNoRoute
	case j >= 0 && (i < 0 || j < i):
		fu.Raw, repoEsc, rest = true, p[:j], p[j+len("/raw/"):]
	default:
		repoEsc, rest = p[:i], p[i+len("/resolve/"):]
	}
	var err error
	if fu.Repo, err = ParseEscapedRepo(typ, repoEsc); err != nil {
		return FileURL{}, err
	}
	revEsc, pathEsc := SplitRevision(rest)
	if fu.Rev, err = Unescape("revision", revEsc); err != nil {
		return FileURL{}, err
	}
	if err := ValidRevision(fu.Rev); err != nil {
		return FileURL{}, err
	}
	if fu.Path, err = Unescape("path", pathEsc); err != nil {
		return FileURL{}, err
	}
	if err := ValidPath(fu.Path); err != nil {
		return FileURL{}, err
	}
	return fu, nil
}

// APIKind is what an /api/{type}s/{repo}/… URL asks for.
type APIKind int

// The API routes the hub grammar knows.
const (
	APIOther     APIKind = iota // anything else (a search, whoami, discussions…)
	APIInfo                     // /api/{t}s/{repo}[/revision/{rev}]
	APITree                     // /api/{t}s/{repo}/tree/{rev}[/{path}]
	APIPathsInfo                // /api/{t}s/{repo}/paths-info/{rev}
	APIXetToken                 // /api/{t}s/{repo}/xet-read-token/{rev}
)

// APIURL is a parsed /api/ URL.
type APIURL struct {
	Kind APIKind
	Repo Repo   // zero for APIOther
	Rev  string // "" for repo info without a revision
	Path string // tree sub-path, may be ""
}

var apiMarkers = []struct {
	marker string
	kind   APIKind
}{
	{"/revision/", APIInfo},
	{"/tree/", APITree},
	{"/paths-info/", APIPathsInfo},
	{"/xet-read-token/", APIXetToken},
}

// ParseAPIURL parses the escaped path of an /api/ URL. A path it does not
// recognise is APIOther with no error; a malformed id, revision or path on a
// recognised route is an *InvalidError; a path outside /api/ is ErrNoRoute.
func ParseAPIURL(escaped string) (APIURL, error) {
	p, ok := strings.CutPrefix(escaped, "/api/")
	if !ok {
		return APIURL{}, ErrNoRoute
	}
	plural, rest, _ := strings.Cut(p, "/")
	typ, ok := ParseRepoType(plural)
	if !ok || rest == "" {
		return APIURL{}, nil
	}
	best, bestKind, bestLen := -1, APIOther, 0
	for _, m := range apiMarkers {
		if i := strings.Index(rest, m.marker); i >= 0 && (best < 0 || i < best) {
			best, bestKind, bestLen = i, m.kind, len(m.marker)
		}
	}
	if best < 0 {
		// Bare repo info: one or two segments and nothing after.
		if strings.Count(rest, "/") > 1 {
			return APIURL{}, nil
		}
		repo, err := ParseEscapedRepo(typ, rest)
		if err != nil {
			return APIURL{}, nil
		}
		return APIURL{Kind: APIInfo, Repo: repo}, nil
	}
	repo, err := ParseEscapedRepo(typ, rest[:best])
	if err != nil {
		return APIURL{}, err
	}
	after := rest[best+bestLen:]
	au := APIURL{Kind: bestKind, Repo: repo}
	revEsc, pathEsc := after, ""
	if bestKind == APITree {
		revEsc, pathEsc = SplitRevision(after)
	}
	if au.Rev, err = Unescape("revision", strings.TrimSuffix(revEsc, "/")); err != nil {
		return APIURL{}, err
	}
	if err := ValidRevision(au.Rev); err != nil {
		return APIURL{}, err
	}
	if pathEsc = strings.Trim(pathEsc, "/"); pathEsc != "" {
		if au.Path, err = Unescape("path", pathEsc); err != nil {
			return APIURL{}, err
		}
		if err := ValidPath(au.Path); err != nil {
			return APIURL{}, err
		}
	}
	return au, nil
}

// ParseEscapedRepo unescapes and validates a repo id taken from a URL.
func ParseEscapedRepo(typ RepoType, escaped string) (Repo, error) {
	id, err := Unescape("repo id", escaped)
	if err != nil {
		return Repo{}, err
	}
	return ParseRepo(typ, id)
}

// Unescape decodes a path segment taken from a URL; field names it in the
// error.
func Unescape(field, s string) (string, error) {
	u, err := url.PathUnescape(s)
	if err != nil {
		return "", &InvalidError{Field: field, Value: s, Reason: "bad percent-encoding"}
	}
	return u, nil
}
