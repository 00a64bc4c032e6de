package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/inproc"
)

// The client commands (ls, pull) reach a hub one of two ways: a running
// hubproxy named by --server, or a hubproxy built in process over --upstream
// and --cache-dir. Both ways, and the flags that choose between them, live
// here so the commands take the same flags and fail with the same advice.

// inProcessURL is the base URL of a hubproxy running inside the CLI, reached
// through inproc.Transport rather than a socket.
const inProcessURL = "http://hubproxy.local"

// serveHint is what to do when no hubproxy answers at --server.
const serveHint = `is it running? start it with "hubproxy serve"`

// serverForm is what --server takes.
const serverForm = "want host:port or http://host:port"

// upstreamHint is what to do when the CLI cannot reach the upstream itself.
const upstreamHint = "offline? set --server to use a running hubproxy, or --upstream"

// remoteFlags are the flags that say which hub a client command talks to,
// and as whom.
type remoteFlags struct {
	server string
	token  string
}

// addRemoteFlags declares --server, --token and the in-process flags;
// cacheHelp says what the command does with --cache-dir.
func addRemoteFlags(f *pflag.FlagSet, r *remoteFlags, cacheHelp string) {
	f.StringVar(&r.server, "server", os.Getenv("HUBPROXY_SERVER"),
		"address of a running hubproxy, host:port or http://host:port; also HUBPROXY_SERVER (default: HF_ENDPOINT if it names a hubproxy and no in-process flag is given, else work in process over --upstream and --cache-dir)")
	// The default stays empty, not $HF_TOKEN, so --help never prints a token.
	f.StringVar(&r.token, "token", "", "hub token sent as Authorization (default $HF_TOKEN)")
	f.String("config", "", "config file (YAML); also HUBPROXY_CONFIG")
	f.String("upstream", app.Defaults().Upstream, "hub to read from when --server is not set")
	f.String("cache-dir", defaultCacheDir(), cacheHelp)
}

// callerToken is the token the command sends: --token, else $HF_TOKEN, as
// huggingface_hub reads it.
func (r *remoteFlags) callerToken() string {
	if r.token != "" {
		return r.token
	}
	return os.Getenv("HF_TOKEN")
}

// connect returns a client for the hub the flags name; cleanup releases an
// in-process hubproxy's cache.
func (r *remoteFlags) connect(cmd *cobra.Command) (c *hubClient, cleanup func(), err error) {
	server, src := r.server, "--server"
	if !cmd.Flags().Changed("server") {
		src = "HUBPROXY_SERVER"
	}
	if server == "" {
		if ep := endpointServer(cmd.Flags()); ep != "" {
			server, src = ep, "HF_ENDPOINT"
		}
	}
	if server == "" {
		return connectInProcess(cmd, r.callerToken())
	}
	base, err := serverURL(server)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %q: %w", src, server, err)
	}
	return &hubClient{http: &http.Client{}, base: base, token: r.callerToken(), explain: serverExplainer(base)}, func() {}, nil
}

// endpointServer is the hubproxy that HF_ENDPOINT names, or "". Clients
// pointed at a hubproxy (the chart sets HF_ENDPOINT on them) mean that
// one, so with no flag saying otherwise the CLI goes through it too. A
// flag of the in-process mode (--upstream, --cache-dir, --config) says
// otherwise, and so does HF_ENDPOINT naming the Hugging Face Hub itself:
// that is an upstream, which the in-process mode reads by default.
func endpointServer(f *pflag.FlagSet) string {
	ep := strings.TrimSpace(os.Getenv("HF_ENDPOINT"))
	if ep == "" || isPublicHub(ep) {
		return ""
	}
	for _, name := range []string{"upstream", "cache-dir", "config"} {
		if f.Changed(name) {
			return ""
		}
	}
	return ep
}

// isPublicHub reports whether endpoint is huggingface.co (or hf.co).
func isPublicHub(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Hostname()) {
	case "huggingface.co", "www.huggingface.co", "hf.co":
		return true
	}
	return false
}

// connectInProcess builds a hubproxy over the configured upstream and cache.
// Its upstream transport is watched so that "upstream unavailable" answers
// can say what actually failed.
func connectInProcess(cmd *cobra.Command, token string) (*hubClient, func(), error) {
	cfg, err := loadConfig(cmd.Flags())
	if err != nil {
		return nil, nil, err
	}
	watch := &reachWatch{rt: cfg.Transport}
	if watch.rt == nil {
		watch.rt = fetch.DefaultTransport()
	}
	cfg.Transport = watch
	built, err := app.Build(cfg, nil)
	if err != nil {
		return nil, nil, lockedHint(err)
	}
	if token == "" {
		// The in-process proxy is the user's own: its configured token
		// (HUBPROXY_UPSTREAM_TOKEN) is theirs to send, and hub API calls
		// carry only the caller's token.
		token = cfg.UpstreamToken
	}
	c := &hubClient{http: &http.Client{Transport: inproc.Transport(built.Main)}, base: inProcessURL, token: token, explain: watch.explain}
	return c, func() { _ = built.Close() }, nil
}

// lockedHint adds what to do when a command meets a cache directory that a
// running server holds.
func lockedHint(err error) error {
	if errors.Is(err, cache.ErrLocked) {
		return fmt.Errorf("%w; pass --server URL to go through the running hubproxy", err)
	}
	return err
}

// serverURL reads --server: a URL, or a bare host:port meaning http://.
// It refuses what could not be a hubproxy's base URL, saying why, rather
// than letting net/http fail later with an error about some request URL.
func serverURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the value is quoted by the caller already
		}
		return "", fmt.Errorf("%v (%s)", err, serverForm)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("scheme %q is not http or https (%s)", u.Scheme, serverForm)
	case u.Hostname() == "":
		return "", fmt.Errorf("no host (%s)", serverForm)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", fmt.Errorf("a base URL takes no query or fragment (%s)", serverForm)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %s is not between 1 and 65535 (%s)", p, serverForm)
		}
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// hubClient sends hub API requests, with the caller's token, to a running
// hubproxy or to one in process.
type hubClient struct {
	http  *http.Client
	base  string // what request paths are appended to
	token string
	// explain rewrites a failed request into what the user can do about
	// it, and passes other errors through.
	explain func(error) error
}

// get GETs rawURL; a non-2xx answer is a *StatusError.
func (c *hubClient) get(ctx context.Context, rawURL string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.explain(err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, c.explain(statusError(req.URL.Path, resp))
	}
	return resp, nil
}

// StatusError is a non-2xx answer from the hub or the proxy.
type StatusError struct {
	URL    string
	Status int
	Code   string // X-Error-Code
	Msg    string
}

func (e *StatusError) Error() string {
	msg := e.Msg
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		return fmt.Sprintf("%s: %s (HTTP %d, %s)", e.URL, msg, e.Status, e.Code)
	}
	return fmt.Sprintf("%s: %s (HTTP %d)", e.URL, msg, e.Status)
}

// statusError reads a non-2xx answer: hubproxy and the hub put the reason in
// X-Error-Message or a JSON {"error": ...} body.
func statusError(path string, resp *http.Response) *StatusError {
	e := &StatusError{URL: path, Status: resp.StatusCode, Code: resp.Header.Get("X-Error-Code"), Msg: resp.Header.Get("X-Error-Message")}
	var body struct{ Error string }
	if b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); json.Unmarshal(b, &body) == nil && body.Error != "" {
		e.Msg = body.Error
	}
	return e
}

// serverExplainer explains failures to reach the hubproxy at base. Errors
// lose net/http's `Get "URL":` prefix, whose URL carries the query string.
func serverExplainer(base string) func(error) error {
	return func(err error) error {
		if reason := unreachable(err); reason != "" {
			if reason == "connection refused" {
				return fmt.Errorf("no hubproxy at %s (%s)", base, serveHint)
			}
			return fmt.Errorf("no hubproxy at %s: %s (%s)", base, reason, serveHint)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			return fmt.Errorf("hubproxy at %s: %w", base, ue.Err)
		}
		return err
	}
}

// unreachable says in a few words why err failed to reach a host — "DNS
// lookup failed", "connection refused" — or "" if err is not a failure to
// connect.
func unreachable(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		if dns.IsTimeout {
			return "DNS lookup timed out"
		}
		return "DNS lookup failed"
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return ""
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "network unreachable"
	case op.Timeout():
		return "connection timed out"
	}
	return "cannot connect"
}

// reachWatch is the in-process hubproxy's upstream transport. That proxy
// answers a failure to reach upstream with a bare 5xx, as it must to its
// clients; the CLI's user is also its operator, so reachWatch keeps the
// cause to tell them.
type reachWatch struct {
	rt http.RoundTripper

	mu   sync.Mutex
	host string // scheme://host of the last request that could not connect
	why  string // unreachable's words for it; "" after a request got through
}

func (w *reachWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.rt.RoundTrip(req)
	why := unreachable(err)
	if err != nil && why == "" {
		return resp, err // reached the host; failed otherwise
	}
	w.mu.Lock()
	w.host, w.why = req.URL.Scheme+"://"+req.URL.Host, why
	w.mu.Unlock()
	return resp, err
}

// explain turns a 5xx from the in-process proxy into "cannot reach" when
// its upstream was unreachable.
func (w *reachWatch) explain(err error) error {
	var se *StatusError
	if !errors.As(err, &se) || se.Status < 500 {
		return err
	}
	w.mu.Lock()
	host, why := w.host, w.why
	w.mu.Unlock()
	if why == "" {
		return err
	}
	return fmt.Errorf("cannot reach %s: %s (%s)", host, why, upstreamHint)
}
