// Package fetch is hubproxy's client for the upstream hub. It resolves file
// metadata with HEAD requests, reads exact byte ranges from the hub or its
// CDN, and passes JSON API calls through. It owns everything about talking
// HTTP to the upstream (credentials, redirects, retries, stall detection) and
// nothing about keeping what it fetches: it never imports internal/cache.
//
// Credentials follow one rule everywhere: the caller's own Authorization
// value is sent if it has one, else the proxy's token, and either goes only to
// the upstream's scheme and host, never to a CDN or any other host a redirect
// names. No error text ever carries a credential or a URL's query string.
package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults for the zero values of Options.
const (
	defaultUserAgent       = "hubproxy"
	defaultMetadataTimeout = 10 * time.Second // huggingface_hub's HF_HUB_ETAG_TIMEOUT
	defaultMaxRedirects    = 10
	defaultRetries         = 3
	defaultStallTimeout    = 30 * time.Second
)

// Options configures a Client. Zero values take the documented defaults.
type Options struct {
	// Upstream is the hub's base URL, e.g. "https://huggingface.co". It may
	// carry a path prefix; it must be http or https, with no userinfo, query
	// or fragment.
	Upstream string
	// Token is the proxy's own token, sent as "Bearer <token>" only when the
	// caller supplied no Authorization, and only on GetRange: the byte fetches
	// of a file the caller was already allowed to resolve with its own
	// credentials. Resolve and API, which decide access, never use it, so the
	// proxy's token never grants a caller access it lacks.
	Token string
	// Transport carries every request. Nil means a clone of
	// http.DefaultTransport with MaxIdleConnsPerHost 64, compression off
	// (ranges and sizes must be the real bytes) and HTTP/2 attempted.
	Transport http.RoundTripper
	// RedirectHosts, when not empty, is the only set of hosts other than the
	// upstream that bytes may be fetched from (a CDN the hub redirects to).
	// An entry matches the host itself and its subdomains ("hf.co" matches
	// "cdn-lfs.hf.co"). Empty: any host, always without credentials.
	RedirectHosts []string
	// UserAgent defaults to "hubproxy".
	UserAgent string
	// Instance names this proxy process in the Via header of every
	// upstream request ("1.1 <Instance>", after the Via the request being
	// served carried; WithVia), so that a proxy whose upstream leads back
	// to itself can tell (ViaNames) and refuse instead of waiting on
	// itself until a timeout. Empty: no Via is sent.
	Instance string
	// MetadataTimeout bounds one Resolve call, retries included. Default 10s.
	MetadataTimeout time.Duration
	// MaxRedirects bounds the redirects one call follows. Default 10;
	// negative follows none.
	MaxRedirects int
	// CheckRedirect, when set, is asked before every redirect followed to
	// the upstream's own origin (a renamed repo's old name answers with a
	// redirect to the new one): an error ends the call with it. It lets the
	// caller hold a redirect target to the rules it holds the request to
	// (allow-repos / deny-repos). Redirects to other hosts (a CDN) carry no
	// credentials and name content already resolved, and are not asked.
	CheckRedirect func(target *url.URL) error
	// Retries is the number of extra attempts after a network error, 5xx or
	// 429, made only before any body byte is returned. Default 3; negative
	// disables retries. Backoff is exponential from 100ms to 2s, stretched to
	// honour Retry-After (capped at 5s) and never outliving the context.
	Retries int
	// StallTimeout fails a GetRange or API response that makes no progress
	// for this long with ErrStalled. Default 30s.
	StallTimeout time.Duration
	// Cooldown is how long calls to the upstream fail at once (matching
	// ErrUnavailable) once it is marked down, before a probe (HEAD of
	// Upstream) asks again; it doubles after each failed probe, up to a
	// minute. It is also the least time between two probes that calls
	// failing with the upstream up can cause. Default 5s. Calls to other
	// hosts (a CDN) are not affected. What marks the upstream down is
	// described in breaker.go: never a Relay, never one failing route.
	Cooldown time.Duration
	// Logger receives the breaker's state changes. Nil discards them.
	Logger *slog.Logger
}

// Client talks to one upstream hub. It is safe for concurrent use.
type Client struct {
	// Immutable after New.
	base    *url.URL // upstream, path without trailing slash
	baseStr string   // base.String(), the prefix of every upstream URL
	token   string
	// redirectHosts limits where bytes may come from; empty = anywhere.
	redirectHosts []string
	ua            string
	instance      string // Options.Instance; "" sends no Via
	// rt is used directly, not through http.Client: every redirect is
	// followed by hand (credentials and HEAD metadata are decided per hop),
	// and http.Client would parse Location first and quote it, signed query
	// and all, in its error text.
	rt           http.RoundTripper
	metaTimeout  time.Duration
	maxRedirects int
	checkRedir   func(*url.URL) error // nil: every same-origin redirect is followed
	retries      int
	stall        time.Duration
	breaker      *upstreamBreaker
	// Backoff bounds; tests shrink them.
	backoffMin, backoffMax, retryAfterMax time.Duration
}

// New checks opts and builds a Client.
func New(opts Options) (*Client, error) {
	base, err := parseUpstream(opts.Upstream)
	if err != nil {
		return nil, err
	}
	if !validHeaderValue(opts.Instance) || strings.ContainsAny(opts.Instance, " ,") {
		return nil, errors.New("fetch: the instance name must be one token without spaces or commas")
	}
	if !validHeaderValue(opts.Token) {
		return nil, errors.New("fetch: the token contains characters not allowed in a header")
	}
	tr := opts.Transport
	if tr == nil {
		tr = DefaultTransport()
	}
	c := &Client{
		base:          base,
		baseStr:       base.String(),
		token:         opts.Token,
		redirectHosts: opts.RedirectHosts,
		ua:            opts.UserAgent,
		instance:      opts.Instance,
		rt:            tr,
		metaTimeout:   opts.MetadataTimeout,
		maxRedirects:  opts.MaxRedirects,
		checkRedir:    opts.CheckRedirect,
		retries:       opts.Retries,
		stall:         opts.StallTimeout,
		backoffMin:    100 * time.Millisecond,
		backoffMax:    2 * time.Second,
		retryAfterMax: 5 * time.Second,
	}
	if c.ua == "" {
		c.ua = defaultUserAgent
	}
	if c.metaTimeout <= 0 {
		c.metaTimeout = defaultMetadataTimeout
	}
	switch {
	case c.maxRedirects == 0:
		c.maxRedirects = defaultMaxRedirects
	case c.maxRedirects < 0:
		c.maxRedirects = 0
	}
	switch {
	case c.retries == 0:
		c.retries = defaultRetries
	case c.retries < 0:
		c.retries = 0
	}
	if c.stall <= 0 {
		c.stall = defaultStallTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c.breaker = newBreaker(opts.Cooldown, c.metaTimeout, c.probe, nil, log)
	return c, nil
}

// Health reports whether the upstream is answering, as far as hubproxy's
// own calls and probes tell: it turns false when a probe confirms that the
// upstream fails (see breaker.go) and true again when one finds it answering.
func (c *Client) Health() Health { return c.breaker.health() }

// Ping sends the breaker's probe (HEAD of the upstream's base URL, once, with
// no credentials), or waits for the one in flight, and reports whether the
// upstream answered at all (any status below 500). Its verdict is the
// breaker's: a failure marks the upstream down, an answer marks it up.
// While the upstream is marked down and its cool-down lasts, it is refused.
func (c *Client) Ping(ctx context.Context) error { return c.breaker.check(ctx) }

// Upstream returns a copy of the upstream base URL.
func (c *Client) Upstream() *url.URL {
	u := *c.base
	return &u
}

func parseUpstream(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's text repeats the input, which could hold credentials.
		return nil, errors.New("fetch: the upstream URL does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("fetch: upstream %s: scheme must be http or https", redact(u))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("fetch: upstream %s: no host", redact(u))
	}
	if u.User != nil {
		return nil, fmt.Errorf("fetch: upstream %s: credentials belong in Token, not the URL", redact(u))
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("fetch: upstream %s: no query or fragment allowed", redact(u))
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	return u, nil
}

// DefaultTransport is the transport Options.Transport defaults to: a clone
// of http.DefaultTransport tuned for many parallel ranged requests to few
// hosts, with compression off so lengths are the files' own. Exported so a
// decorator (metrics) can wrap the same transport.
func DefaultTransport() *http.Transport {
	var t *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment}
	}
	t.MaxIdleConnsPerHost = 64
	t.DisableCompression = true
	t.ForceAttemptHTTP2 = true
	return t
}

// authFor is the Authorization value to send upstream: the caller's own, else
// (when proxyToken allows it) the proxy token as a bearer, else none.
func (c *Client) authFor(callerAuth string, proxyToken bool) (string, error) {
	if callerAuth != "" {
		if !validHeaderValue(callerAuth) {
			// Never echo the value: it is a credential.
			return "", errors.New("fetch: the Authorization value contains characters not allowed in a header")
		}
		return callerAuth, nil
	}
	if c.token != "" && proxyToken {
		return "Bearer " + c.token, nil
	}
	return "", nil
}

// secrets lists the strings no error text may contain for a call made with
// the Authorization value authz.
func (c *Client) secrets(authz string) []string {
	s := []string{authz}
	if _, cred, ok := strings.Cut(authz, " "); ok {
		s = append(s, strings.TrimSpace(cred))
	}
	if c.token != "" {
		s = append(s, c.token)
	}
	return s
}

// sameOrigin reports whether u has the upstream's scheme and host (port
// included, default ports normalised): the only place credentials may go.
// hostAllowed reports whether bytes may be fetched from u: the upstream
// itself, or any host when no RedirectHosts are set, or a listed one.
func (c *Client) hostAllowed(u *url.URL) bool {
	if len(c.redirectHosts) == 0 || c.sameOrigin(u) {
		return true
	}
	h := strings.ToLower(u.Hostname())
	for _, a := range c.redirectHosts {
		a = strings.ToLower(strings.TrimPrefix(a, "."))
		if h == a || strings.HasSuffix(h, "."+a) {
			return true
		}
	}
	return false
}

func (c *Client) sameOrigin(u *url.URL) bool {
	return origin(u) == origin(c.base)
}

func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// newRequest builds a request with the headers every upstream call carries.
// Accept is always "*/*": a client's Accept could ask the hub for Xet file
// info (docs/hub-protocol.md §2). Accept-Encoding is identity so that sizes and ranges
// are the real bytes.
func (c *Client) newRequest(ctx context.Context, method string, u *url.URL, authz string, body []byte, contentType string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bodyReader(body))
	if err != nil {
		return nil, fmt.Errorf("fetch: building %s %s: invalid request", method, redact(u))
	}
	req.Header.Set("User-Agent", c.ua)
	req.Header.Set("Accept", "*/*")
	req.Header.Set("Accept-Encoding", "identity")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if via := c.viaFor(ctx); via != "" {
		req.Header.Set("Via", via)
	}
	return req, nil
}

// validHeaderValue rejects control characters (other than tab), which would
// either split a header or make the transport fail with a message.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < 0x20 && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// bodyReader avoids handing http a typed-nil reader for an empty body.
func bodyReader(b []byte) io.Reader {
	if b == nil {
		return nil
	}
	return bytes.NewReader(b)
}

// followable asks CheckRedirect about a redirect to target, when the target
// is on the upstream's own origin.
func (c *Client) followable(target *url.URL) error {
	if c.checkRedir == nil || !c.sameOrigin(target) {
		return nil
	}
	return c.checkRedir(target)
}
