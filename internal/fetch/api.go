package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// API sends method and pathAndQuery (which starts with "/api/") to the
// upstream and returns the response whatever its status: the caller reads and
// closes it, and decides what a 4xx or 5xx means.
//
// Only three things of the client's request travel: the Authorization (auth,
// else the proxy token), header's Content-Type, and body. Accept is always
// "*/*" and Accept-Encoding identity: the client's Accept is never forwarded,
// since it could ask the hub for Xet file info (HUB-PROTOCOL §2).
//
// GET and HEAD follow relative redirects (up to MaxRedirects) and are retried
// on network errors, 5xx and 429; an absolute redirect is returned as is, for
// the caller to judge. Other methods are sent once and never redirected.
// Network errors wrap ErrUnavailable.
func (c *Client) API(ctx context.Context, method, pathAndQuery, auth string, header http.Header, body []byte) (*http.Response, error) {
	if !strings.HasPrefix(pathAndQuery, "/api/") {
		return nil, errors.New("fetch: API paths start with /api/")
	}
	u, err := url.Parse(c.baseStr + pathAndQuery)
	if err != nil || u.Fragment != "" {
		return nil, errors.New("fetch: the API path does not parse")
	}
	authz, err := c.authFor(auth, false)
	if err != nil {
		return nil, err
	}
	contentType := header.Get("Content-Type")
	idempotent := method == http.MethodGet || method == http.MethodHead

	for hop := 0; ; hop++ {
		resp, g, err := c.send(ctx, idempotent, 0, func(ctx context.Context) (*http.Request, error) {
			return c.newRequest(ctx, method, u, authz, body, contentType)
		})
		if err != nil {
			return nil, err
		}
		g.stop() // a no-op without a stall guard; the body stays on ctx
		if !idempotent || resp.StatusCode < 300 || resp.StatusCode >= 400 {
			return resp, nil
		}
		loc := resp.Header.Get("Location")
		if loc == "" {
			return resp, nil
		}
		ref, perr := location(resp, u)
		if perr != nil {
			resp.Body.Close()
			return nil, perr
		}
		if ref.IsAbs() || ref.Host != "" {
			return resp, nil
		}
		discard(resp.Body)
		if hop >= c.maxRedirects {
			return nil, &ProtocolError{URL: redact(u), Reason: fmt.Sprintf("more than %d redirects", c.maxRedirects)}
		}
		// A relative redirect stays on the upstream, so the credentials
		// may follow it; a GET or HEAD carries no body to resend.
		u = u.ResolveReference(ref)
		body, contentType = nil, ""
	}
}
