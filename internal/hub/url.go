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

// FileURL is a parsed /{prefix}{repo}/{resolve|raw}/{rev}/{path} URL: the
// file it names, and which of the two routes named it.
type FileURL struct {
	FileRef
	Raw bool // /raw/ rather than /resolve/
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
	// APIResolveCache is /api/resolve-cache/{t}s/{repo}/{commit}/{path},
	// where the Hub's relative redirects for regular files point.
	APIResolveCache
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
//
// Every /api/ path, recognised or not, is also refused (*InvalidError) if
// the Hub or a server in front of it could read it differently from us: a
// dot segment in any encoding, a backslash, or an encoded '/' where a route
// name or repo id sits (checkAPIPath). Unrecognised paths are relayed, so
// this is what keeps "/api/../{repo}/resolve/…" from reaching a repo
// nobody checked.
func ParseAPIURL(escaped string) (APIURL, error) {
	p, ok := strings.CutPrefix(escaped, "/api/")
	if !ok {
		return APIURL{}, ErrNoRoute
	}
	if err := checkAPIPath(p); err != nil {
		return APIURL{}, err
	}
	plural, rest, _ := strings.Cut(p, "/")
	if plural == "resolve-cache" {
		return parseResolveCache(rest)
	}
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

// parseResolveCache parses rest, the part after "/api/resolve-cache/", as
// {t}s/{repo}/{commit}/{path}. The id is one segment or two and the Hub
// only ever redirects there with a full commit id, so the commit's position
// is what says where the id ends. A path where that cannot be told (no
// commit, or a commit-like segment in both places) is APIOther: the caller
// knows no repo for it.
func parseResolveCache(rest string) (APIURL, error) {
	plural, rest, _ := strings.Cut(rest, "/")
	typ, ok := ParseRepoType(plural)
	if !ok {
		return APIURL{}, nil
	}
	segs := strings.Split(rest, "/")
	one := len(segs) >= 3 && IsCommit(segs[1])
	two := len(segs) >= 4 && IsCommit(segs[2])
	if one == two {
		return APIURL{}, nil
	}
	n := 1
	if two {
		n = 2
	}
	repo, err := ParseEscapedRepo(typ, strings.Join(segs[:n], "/"))
	if err != nil {
		return APIURL{}, err
	}
	au := APIURL{Kind: APIResolveCache, Repo: repo, Rev: segs[n]}
	if au.Path, err = Unescape("path", strings.Join(segs[n+1:], "/")); err != nil {
		return APIURL{}, err
	}
	if err := ValidPath(au.Path); err != nil {
		return APIURL{}, err
	}
	return au, nil
}

// maxUnescapes bounds how many layers of percent-encoding checkAPIPath
// peels off a segment: "%25252e" is three.
const maxUnescapes = 4

// checkAPIPath refuses an /api/ path (p, escaped, after "/api/") that a
// server could normalise into another path than the one we parse:
//   - a "." or ".." segment, plain or percent-encoded in any case and to any
//     depth ("%2e", "%2E", "%252e"), also where an encoded '/' inside a
//     segment would make one ("%2e%2e%2fx");
//   - a backslash anywhere, plain or encoded (some servers read it as '/');
//   - an encoded '/' in the route name or in a repo id's place (the two
//     segments after {t}s/ or resolve-cache/{t}s/), which the Hub could take
//     as the slash between namespace and name. Encoded slashes stay allowed
//     further on, where revisions ("refs%2Fpr%2F1") and tree paths carry
//     them.
func checkAPIPath(p string) error {
	bad := func(field, reason string) error {
		return &InvalidError{Field: field, Value: "/api/" + p, Reason: reason}
	}
	segs := strings.Split(p, "/")
	idAt := 1 // segs[idAt] and segs[idAt+1] may hold a repo id
	if segs[0] == "resolve-cache" {
		idAt = 2
	}
	for i, seg := range segs {
		dec := seg
		for range maxUnescapes {
			u, err := url.PathUnescape(dec)
			if err != nil || u == dec {
				break
			}
			dec = u
		}
		if strings.ContainsRune(dec, '\\') {
			return bad("path", "a backslash, plain or percent-encoded, is not allowed in /api/ paths (some servers read it as '/')")
		}
		for _, piece := range strings.Split(dec, "/") {
			if piece == "." || piece == ".." {
				return bad("path", "'.' and '..' segments, plain or percent-encoded, are not allowed in /api/ paths")
			}
		}
		if strings.Contains(dec, "/") && (i == 0 || i == idAt || i == idAt+1) {
			return bad("repo id", "an encoded '/' (%2F) is not allowed in a route name or repo id: the slash between namespace and name is literal")
		}
	}
	return nil
}

// ParseEscapedRepo unescapes and validates a repo id taken from a URL. The
// slash between namespace and name must be literal: no client encodes it,
// and an encoded one ("org%2Fname") is a path that some servers would split
// and others would not.
func ParseEscapedRepo(typ RepoType, escaped string) (Repo, error) {
	id, err := Unescape("repo id", escaped)
	if err != nil {
		return Repo{}, err
	}
	if strings.Count(id, "/") != strings.Count(escaped, "/") {
		return Repo{}, &InvalidError{Field: "repo id", Value: escaped, Reason: "an encoded '/' (%2F) is not allowed: the slash between namespace and name is literal"}
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
