package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Want is what the answer to a ranged GET must describe: the file that was
// resolved. A zero field is not checked.
type Want struct {
	Size int64  // the file's size: the Content-Range total must equal it
	ETag string // normalised; X-Linked-Etag, and an upstream ETag of the same kind, must equal it
}

// GetRange GETs bytes [off, off+n) of rawURL, a DownloadURL from Resolve (on
// the upstream or a CDN), of the file want describes. n must be at least 1.
//
// Credentials (auth, else the proxy token) are sent only while the URL has the
// upstream's scheme and host; once a redirect leaves it they are dropped for
// the rest of the chain, so a CDN never sees them. Redirects are followed up
// to MaxRedirects.
//
// The answer must be a 206 whose Content-Range is exactly
// "bytes off-(off+n-1)/total" and whose Content-Length, when present, is n;
// anything else (a 200 above all) is a *RangeError and no data is returned.
// An answer about another file (a total other than want.Size, or an ETag
// that names other content, as a branch that moved would give) is a
// *ProtocolError, and no data is returned either.
// The body then yields exactly n bytes: a short one ends in
// io.ErrUnexpectedEOF, a long one in ErrLongBody, and a read that makes no
// progress for StallTimeout fails with ErrStalled. 401/403/410 match
// ErrExpired wherever they come from (the link expired or was revoked:
// resolve again). Network errors, 5xx and 429 are retried before any byte is
// returned.
func (c *Client) GetRange(ctx context.Context, rawURL, auth string, want Want, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 1 || off > maxInt64-n {
		return nil, fmt.Errorf("fetch: invalid range: offset %d, length %d", off, n)
	}
	last := off + n - 1
	resp, g, u, err := c.rangedGet(ctx, rawURL, auth, fmt.Sprintf("bytes=%d-%d", off, last))
	if err != nil {
		return nil, err
	}
	if code := resp.StatusCode; code != http.StatusPartialContent {
		resp.Body.Close() // a 200 is the whole file: never read it
		g.stop()
		return nil, &RangeError{URL: redact(u), Status: code, Want: wantRange(off, last), Got: "status " + strconv.Itoa(code)}
	}
	rerr := checkRange(resp, u, off, last)
	if rerr == nil {
		rerr = c.checkIdentity(resp, u, want)
	}
	if rerr != nil {
		resp.Body.Close()
		g.stop()
		return nil, rerr
	}
	return &rangeBody{body: resp.Body, g: g, left: n, n: n, url: redact(u)}, nil
}

// rangedGet GETs rawURL with the Range header rangeHeader, following
// redirects as GetRange describes, and returns the first answer that is
// not a redirect if it is a 2xx, with its guard and the URL that gave it.
// Any other status is returned as a *StatusError.
func (c *Client) rangedGet(ctx context.Context, rawURL, auth, rangeHeader string) (*http.Response, *guard, *url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Never echo rawURL: its query may be a CDN signature.
		return nil, nil, nil, errors.New("fetch: the download URL is not an absolute http(s) URL")
	}
	if u.User != nil {
		return nil, nil, nil, fmt.Errorf("fetch: download URL %s carries credentials", redact(u))
	}
	authz, err := c.authFor(auth, true)
	if err != nil {
		return nil, nil, nil, err
	}
	credentials := true // cleared for good by the first hop off the upstream
	for hop := 0; ; hop++ {
		if !c.hostAllowed(u) {
			return nil, nil, nil, &ProtocolError{URL: redact(u), Reason: "fetching from this host is not allowed (redirect-hosts)"}
		}
		hopAuth := ""
		if credentials && c.sameOrigin(u) {
			hopAuth = authz
		} else {
			credentials = false
		}
		resp, g, err := c.send(ctx, true, c.stall, func(ctx context.Context) (*http.Request, error) {
			req, err := c.newRequest(ctx, http.MethodGet, u, hopAuth, nil, "")
			if err == nil {
				req.Header.Set("Range", rangeHeader)
			}
			return req, err
		})
		if err != nil {
			return nil, nil, nil, err
		}
		switch code := resp.StatusCode; {
		case code >= 200 && code < 300:
			return resp, g, u, nil
		case code >= 300 && code < 400:
			g.discard(resp.Body)
			g.stop()
			ref, perr := location(resp, u)
			if perr != nil {
				return nil, nil, nil, perr
			}
			if hop >= c.maxRedirects {
				return nil, nil, nil, &ProtocolError{URL: redact(u), Reason: fmt.Sprintf("more than %d redirects", c.maxRedirects)}
			}
			next := u.ResolveReference(ref)
			if err := c.followable(next); err != nil {
				return nil, nil, nil, err
			}
			u = next
		default:
			g.stop()
			return nil, nil, nil, newStatusError(resp, u, true, c.secrets(authz))
		}
	}
}

const maxInt64 = 1<<63 - 1

func wantRange(off, last int64) string { return fmt.Sprintf("bytes %d-%d/*", off, last) }

// checkRange verifies a 206 against the request (RFC 9110 §14.4): the
// Content-Range must name exactly [off, last] of a total that contains it,
// Content-Length (when sent) must be its length, and the body must not be
// encoded, since an encoded body is not the file's bytes.
func checkRange(resp *http.Response, u *url.URL, off, last int64) error {
	bad := func(got string) error {
		return &RangeError{URL: redact(u), Status: resp.StatusCode, Want: wantRange(off, last), Got: got}
	}
	cr := resp.Header.Get("Content-Range")
	a, b, total, ok := parseContentRange(cr)
	if !ok || a != off || b != last || total <= last {
		if cr == "" {
			return bad("no Content-Range")
		}
		return bad(strconv.Quote(clean(cr, 96, nil)))
	}
	if resp.ContentLength >= 0 && resp.ContentLength != last-off+1 {
		return bad("Content-Length " + strconv.FormatInt(resp.ContentLength, 10))
	}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return bad("Content-Encoding " + strconv.Quote(clean(enc, 32, nil)))
	}
	return nil
}

// checkIdentity refuses a 206 that describes a file other than want: a
// Content-Range total that is not the resolved size, an X-Linked-Etag that
// differs, or, in a hub's answer about a file (one that names its commit in
// X-Repo-Commit: the hub itself, or another hubproxy), an ETag of the same
// kind (sha256 or git sha1) naming other content. A CDN's own ETag is not
// the hub's (the real CDN sends another 64-hex value), and an LFS file's
// pointer oid is not its content hash, so no other ETag is compared.
func (c *Client) checkIdentity(resp *http.Response, u *url.URL, want Want) error {
	bad := func(reason string) error {
		return &ProtocolError{URL: redact(u), Reason: "the answer describes another file: " + reason}
	}
	if want.Size > 0 {
		if _, _, total, _ := parseContentRange(resp.Header.Get("Content-Range")); total != want.Size {
			return bad(fmt.Sprintf("total size %d, want %d", total, want.Size))
		}
	}
	if want.ETag == "" {
		return nil
	}
	if v := resp.Header.Get("X-Linked-Etag"); v != "" && hub.NormalizeETag(v) != want.ETag {
		return bad("X-Linked-Etag " + strconv.Quote(clean(hub.NormalizeETag(v), 72, nil)) + ", want " + want.ETag)
	}
	if v := hub.NormalizeETag(resp.Header.Get("ETag")); v != "" && resp.Header.Get("X-Repo-Commit") != "" &&
		hub.ETagKind(v) != hub.HashUnknown && hub.ETagKind(v) == hub.ETagKind(want.ETag) && v != want.ETag {
		return bad("ETag " + strconv.Quote(v) + ", want " + want.ETag)
	}
	return nil
}

// parseContentRange parses "bytes a-b/total" with a numeric total. The
// unknown-total form "bytes a-b/*" is refused: the cache needs the size.
func parseContentRange(v string) (a, b, total int64, ok bool) {
	rest, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	span, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	as, bs, found := strings.Cut(span, "-")
	if !found {
		return 0, 0, 0, false
	}
	var ok1, ok2, ok3 bool
	a, ok1 = parseDecimal(as)
	b, ok2 = parseDecimal(bs)
	total, ok3 = parseDecimal(tot)
	if !ok1 || !ok2 || !ok3 || a > b {
		return 0, 0, 0, false
	}
	return a, b, total, true
}
