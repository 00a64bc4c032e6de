package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// API sends method and pathAndQuery (which starts with "/api/") to the
// upstream and returns the response whatever its status: the caller reads and
// closes it, and decides what a 4xx or 5xx means.
//
// Only three things of the client's request travel: the Authorization (auth,
// else the proxy token), header's Content-Type, and body. Accept is always
// "*/*" and Accept-Encoding identity: the client's Accept is never forwarded,
// since it could ask the hub for Xet file info (docs/hub-protocol.md §2).
//
// GET and HEAD follow relative redirects (up to MaxRedirects) and are retried
// on network errors, 5xx and 429; an absolute redirect is returned as is, for
// the caller to judge. Other methods are sent once and never redirected.
//
// A hung upstream cannot hold the call: the response headers must arrive
// within MetadataTimeout (retries and redirects included), and the body must
// make progress at least every StallTimeout. Either failure, like a network
// error, wraps ErrUnavailable.
//
// API is for the calls whose route hubproxy chose (the cached repo info,
// tree and paths-info routes, Visibility): their failures may make the
// breaker probe the upstream. Relay is for everything else.
func (c *Client) API(ctx context.Context, method, pathAndQuery, auth string, header http.Header, body []byte) (*http.Response, error) {
	return c.api(ctx, false, method, pathAndQuery, auth, header, body)
}

// Relay is API for a client's own request passed through uncached: method,
// path, query and body are the client's. Its outcome never reaches the
// breaker, so no client can mark the upstream down by naming a route that
// fails (breaker.go); like any upstream call it is refused at once while the
// upstream is marked down.
func (c *Client) Relay(ctx context.Context, method, pathAndQuery, auth string, header http.Header, body []byte) (*http.Response, error) {
	return c.api(ctx, true, method, pathAndQuery, auth, header, body)
}

func (c *Client) api(ctx context.Context, relay bool, method, pathAndQuery, auth string, header http.Header, body []byte) (*http.Response, error) {
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

	// The call's own context: cancelled when the body is closed, or with a
	// timeoutError if no answer came within the metadata timeout.
	ctx, cancel := context.WithCancelCause(ctx)
	var settled atomic.Bool // set once by whichever comes first: the answer or the timeout
	timer := time.AfterFunc(c.metaTimeout, func() {
		if settled.CompareAndSwap(false, true) {
			cancel(&timeoutError{what: fmt.Sprintf("no answer within %s", c.metaTimeout)})
		}
	})
	// answer hands resp to the caller unless the timeout won the race.
	answer := func(resp *http.Response, g *guard) (*http.Response, error) {
		timer.Stop()
		if !settled.CompareAndSwap(false, true) {
			resp.Body.Close()
			g.stop()
			return nil, transportErr(ctx, method, redact(u), context.Cause(ctx))
		}
		resp.Body = &apiBody{body: resp.Body, g: g, cancel: cancel, url: redact(u)}
		return resp, nil
	}
	for hop := 0; ; hop++ {
		resp, g, err := c.sendAs(ctx, relay, idempotent, c.stall, func(ctx context.Context) (*http.Request, error) {
			return c.newRequest(ctx, method, u, authz, body, contentType)
		})
		if err != nil {
			timer.Stop()
			cancel(nil)
			return nil, err
		}
		if !idempotent || resp.StatusCode < 300 || resp.StatusCode >= 400 || resp.Header.Get("Location") == "" {
			return answer(resp, g)
		}
		ref, perr := location(resp, u)
		if perr != nil {
			resp.Body.Close()
			g.stop()
			timer.Stop()
			cancel(nil)
			return nil, perr
		}
		if ref.IsAbs() || ref.Host != "" {
			return answer(resp, g)
		}
		g.discard(resp.Body)
		g.stop()
		if hop >= c.maxRedirects {
			timer.Stop()
			cancel(nil)
			return nil, &ProtocolError{URL: redact(u), Reason: fmt.Sprintf("more than %d redirects", c.maxRedirects)}
		}
		// A relative redirect stays on the upstream, so the credentials
		// may follow it; a GET or HEAD carries no body to resend.
		next := u.ResolveReference(ref)
		if err := c.followable(next); err != nil {
			timer.Stop()
			cancel(nil)
			return nil, err
		}
		u = next
		body, contentType = nil, ""
	}
}

// apiBody is the body of an API answer. Each Read is bounded by the stall
// guard, so an upstream that sends headers and then goes quiet fails with an
// error matching ErrUnavailable; Close releases the call's context.
type apiBody struct {
	body   io.ReadCloser
	g      *guard
	cancel context.CancelCauseFunc
	url    string
	once   sync.Once
}

func (b *apiBody) Read(p []byte) (int, error) {
	b.g.arm()
	n, err := b.body.Read(p)
	b.g.disarm()
	if err != nil && err != io.EOF {
		if b.g.stalled() {
			err = &netError{method: "GET", url: b.url, err: ErrStalled}
		} else if ctx := b.g.ctx(); ctx.Err() != nil {
			err = transportErr(ctx, "GET", b.url, err)
		}
	}
	return n, err
}

func (b *apiBody) Close() error {
	err := b.body.Close()
	b.once.Do(func() {
		b.g.stop()
		b.cancel(nil)
	})
	return err
}
