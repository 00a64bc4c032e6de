package repoapi

import (
	"strings"
)

// RewriteLinks rewrites an RFC 8288 Link header so that every target on the
// upstream points at the proxy instead, and drops Xet links. Python follows
// the next link verbatim, and the JS client accepts only an absolute URL
// followed by "; rel=" with whitespace after the semicolon (docs/hub-protocol.md §3),
// so the output is always `<absolute>; rel="next"`.
func RewriteLinks(header, upstream, public string) string {
	var out []string
	rest := header
	for {
		open := strings.IndexByte(rest, '<')
		if open < 0 {
			break
		}
		end := strings.IndexByte(rest[open:], '>')
		if end < 0 {
			break
		}
		target := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		// Parameters run to the next link, which starts after a comma that
		// is followed by '<'.
		paramsEnd := len(rest)
		if i := strings.Index(rest, "<"); i >= 0 {
			paramsEnd = i
		}
		params := strings.TrimRight(strings.TrimSpace(rest[:paramsEnd]), ",")
		rest = rest[paramsEnd:]
		var ps []string
		xet := false
		for _, p := range strings.Split(params, ";") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			name, val, ok := strings.Cut(p, "=")
			if ok {
				name, val = strings.TrimSpace(name), strings.Trim(strings.TrimSpace(val), `"`)
				if strings.EqualFold(name, "rel") && strings.Contains(strings.ToLower(val), "xet") {
					xet = true
				}
				p = name + `="` + val + `"`
			}
			ps = append(ps, p)
		}
		if xet {
			continue
		}
		link := "<" + RewriteURL(target, upstream, public) + ">"
		if len(ps) > 0 {
			link += "; " + strings.Join(ps, "; ")
		}
		out = append(out, link)
	}
	return strings.Join(out, ", ")
}

// RewriteURL maps a URL on the upstream (absolute, or relative to its root)
// to the same path on the proxy. Other URLs are returned unchanged.
func RewriteURL(target, upstream, public string) string {
	upstream = strings.TrimSuffix(upstream, "/")
	switch {
	case strings.HasPrefix(target, upstream+"/"):
		return public + strings.TrimPrefix(target, upstream)
	case strings.HasPrefix(target, "/") && !strings.HasPrefix(target, "//"):
		return public + target
	}
	return target
}
