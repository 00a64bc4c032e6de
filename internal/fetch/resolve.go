package fetch

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// FileMeta is what a HEAD on a resolve URL says about one file at one
// revision (docs/hub-protocol.md §1a).
type FileMeta struct {
	Commit      string // X-Repo-Commit, a 40-hex commit
	ETag        string // hub.NormalizeETag(X-Linked-Etag), else of ETag
	Size        int64  // X-Linked-Size, else Content-Length
	DownloadURL string // absolute: the absolute Location of the redirect (CDN), else the final URL after relative redirects
	Linked      bool   // X-Linked-* headers were present (LFS/Xet file)
}

// Resolve sends HEAD {upstream}/{prefix}{repo}/resolve/{rev}/{path} for f
// and reads the file's metadata the way huggingface_hub does: redirects are
// not followed by the transport; a relative Location is re-issued as a HEAD
// on the upstream (its path only, as the hub client does), and an absolute
// Location (a CDN) stops the walk, that 3xx's own headers being the metadata
// and its Location the DownloadURL. Nothing is ever sent to the CDN here.
//
// auth is the caller's raw Authorization value; empty means the proxy token,
// if any. The whole call, retries included, is bounded by MetadataTimeout,
// whose expiry matches ErrUnavailable.
//
// Errors: *hub.InvalidError for a bad repo, revision or path; *StatusError
// for a non-2xx/3xx answer; *ProtocolError when the answer lacks a commit,
// ETag or size, or redirects badly; ErrUnavailable for network failures.
func (c *Client) Resolve(ctx context.Context, auth string, f hub.FileRef) (FileMeta, error) {
	if f.Repo.IsZero() {
		return FileMeta{}, &hub.InvalidError{Field: "repo id", Reason: "no repository named"}
	}
	if err := hub.ValidRevision(f.Rev); err != nil {
		return FileMeta{}, err
	}
	if err := hub.ValidPath(f.Path); err != nil {
		return FileMeta{}, err
	}
	authz, err := c.authFor(auth, false)
	if err != nil {
		return FileMeta{}, err
	}
	u, err := url.Parse(c.baseStr + "/" + f.Repo.Type().URLPrefix() + f.Repo.ID() +
		"/resolve/" + url.PathEscape(f.Rev) + "/" + escapePath(f.Path))
	if err != nil {
		return FileMeta{}, fmt.Errorf("fetch: building the resolve URL for %s: %w", f.Repo, err)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.metaTimeout,
		&timeoutError{what: fmt.Sprintf("no metadata answer within %s", c.metaTimeout)})
	defer cancel()

	for hop := 0; ; hop++ {
		resp, g, err := c.send(ctx, true, 0, func(ctx context.Context) (*http.Request, error) {
			return c.newRequest(ctx, http.MethodHead, u, authz, nil, "")
		})
		if err != nil {
			return FileMeta{}, err
		}
		g.stop()
		switch code := resp.StatusCode; {
		case code >= 200 && code < 300:
			resp.Body.Close()
			m, err := metadata(resp, u, u.String(), false)
			return c.pin(m, f.Rev), err
		case code >= 300 && code < 400:
			resp.Body.Close()
			ref, perr := location(resp, u)
			if perr != nil {
				return FileMeta{}, perr
			}
			if ref.IsAbs() || ref.Host != "" {
				m, err := metadata(resp, u, u.ResolveReference(ref).String(), true)
				return c.pin(m, f.Rev), err
			}
			if hop >= c.maxRedirects {
				return FileMeta{}, &ProtocolError{URL: redact(u), Reason: fmt.Sprintf("more than %d redirects", c.maxRedirects)}
			}
			// huggingface_hub re-issues the HEAD with the target's path
			// only; the hub's own relative redirects are built for that.
			next := u.ResolveReference(&url.URL{Path: ref.Path, RawPath: ref.RawPath})
			if err := c.followable(next); err != nil {
				return FileMeta{}, err
			}
			u = next
		default:
			return FileMeta{}, newStatusError(resp, u, false, c.secrets(authz))
		}
	}
}

// pin makes a download URL on the upstream name the resolved commit rather
// than the branch or tag asked for. An upstream that serves the bytes itself
// (a hub answering 200 for a gated repo's small file, or another hubproxy)
// would otherwise be asked for "/resolve/main/…" on every later range, and a
// branch that moves while the file fills would mix two commits' bytes under
// one ETag. CDN URLs are content-addressed already, and the hub's own
// relative redirects (/api/resolve-cache/…/{commit}/…) carry the commit.
func (c *Client) pin(m FileMeta, rev string) FileMeta {
	if hub.IsCommit(rev) || !hub.IsCommit(m.Commit) {
		return m
	}
	u, err := url.Parse(m.DownloadURL)
	if err != nil || !c.sameOrigin(u) {
		return m
	}
	esc := u.EscapedPath()
	from := "/resolve/" + url.PathEscape(rev) + "/"
	i := strings.Index(esc, from)
	if i < 0 {
		return m
	}
	raw := esc[:i] + "/resolve/" + m.Commit + "/" + esc[i+len(from):]
	p, err := url.PathUnescape(raw)
	if err != nil {
		return m
	}
	u.Path, u.RawPath = p, raw
	m.DownloadURL = u.String()
	return m
}

// metadata reads FileMeta from the answer to a HEAD on u. On a redirect the
// answer's own Content-Length is the redirect body's, not the file's, so only
// X-Linked-Size counts (huggingface_hub ≥ 1.29 does the same).
func metadata(resp *http.Response, u *url.URL, downloadURL string, redirect bool) (FileMeta, error) {
	bad := func(format string, args ...any) (FileMeta, error) {
		return FileMeta{}, &ProtocolError{URL: redact(u), Reason: fmt.Sprintf(format, args...)}
	}
	h := resp.Header
	m := FileMeta{DownloadURL: downloadURL}

	m.Commit = h.Get("X-Repo-Commit")
	if m.Commit == "" {
		return bad("no X-Repo-Commit header")
	}
	if !hub.IsCommit(m.Commit) {
		return bad("X-Repo-Commit is not a 40-hex commit id")
	}

	linkedETag, linkedSize := h.Get("X-Linked-Etag"), h.Get("X-Linked-Size")
	m.Linked = linkedETag != "" || linkedSize != ""
	if linkedETag != "" {
		m.ETag = hub.NormalizeETag(linkedETag)
	} else {
		m.ETag = hub.NormalizeETag(h.Get("ETag"))
	}
	if m.ETag == "" {
		return bad("no X-Linked-Etag or ETag header")
	}

	sizeHeader, sizeName := linkedSize, "X-Linked-Size"
	if sizeHeader == "" {
		if redirect {
			return bad("redirect %d without X-Linked-Size", resp.StatusCode)
		}
		sizeHeader, sizeName = h.Get("Content-Length"), "Content-Length"
		if sizeHeader == "" && resp.ContentLength >= 0 {
			sizeHeader = strconv.FormatInt(resp.ContentLength, 10)
		}
	}
	if sizeHeader == "" {
		return bad("no X-Linked-Size or Content-Length header")
	}
	size, ok := parseDecimal(sizeHeader)
	if !ok {
		return bad("%s is not a byte count", sizeName)
	}
	m.Size = size
	return m, nil
}

// location parses a redirect's Location header. A missing or unparsable
// Location, or one whose scheme is not http(s), breaks the protocol.
func location(resp *http.Response, from *url.URL) (*url.URL, error) {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil, &ProtocolError{URL: redact(from), Reason: fmt.Sprintf("redirect %d without Location", resp.StatusCode)}
	}
	ref, err := url.Parse(loc)
	if err != nil {
		return nil, &ProtocolError{URL: redact(from), Reason: "redirect Location does not parse"}
	}
	if ref.Scheme != "" && ref.Scheme != "http" && ref.Scheme != "https" {
		return nil, &ProtocolError{URL: redact(from), Reason: "redirect Location is not http(s)"}
	}
	if (ref.IsAbs() || ref.Host != "") && ref.User != nil {
		return nil, &ProtocolError{URL: redact(from), Reason: "redirect Location carries credentials"}
	}
	return ref, nil
}

// escapePath escapes each '/'-separated segment of a repo file path, as
// huggingface_hub's quote(filename) keeps the slashes.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// parseDecimal parses a non-negative decimal integer, digits only (no sign,
// no spaces), as Content-Length and Content-Range require.
func parseDecimal(s string) (int64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}
