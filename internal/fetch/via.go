package fetch

import (
	"context"
	"errors"
	"net/http"
	"strings"
)

// ErrLoop means a request came back to the proxy that sent it: the
// upstream setting points at this hubproxy, directly or through other
// proxies. It is a configuration error, not an outage: no retry, no cache
// fallback, and the breaker never hears of it.
var ErrLoop = errors.New("hubproxy's upstream points back at itself")

// maxVia bounds the Via chain carried on: a client chooses its first
// entries, and a loop must not grow a header without end.
const maxVia = 2048

type viaKey struct{}

// WithVia returns ctx carrying the Via header of the request being served,
// which every upstream request made on ctx extends with this proxy's own
// entry, so that a chain of proxies that leads back to one of them (A → B
// → A) is seen by the one it returns to.
func WithVia(ctx context.Context, via string) context.Context {
	if via == "" || len(via) > maxVia || !validHeaderValue(via) {
		return ctx
	}
	return context.WithValue(ctx, viaKey{}, via)
}

// viaFor is the Via an upstream request on ctx carries: the incoming
// request's, then this proxy's own entry (RFC 9110 §7.6.3). Without an
// instance token the client adds nothing.
func (c *Client) viaFor(ctx context.Context) string {
	if c.instance == "" {
		return ""
	}
	own := "1.1 " + c.instance
	if in, _ := ctx.Value(viaKey{}).(string); in != "" {
		return in + ", " + own
	}
	return own
}

// ViaNames reports whether a Via header value (its lines joined or not)
// has an entry received by instance: the request has passed through that
// proxy already.
func ViaNames(via []string, instance string) bool {
	if instance == "" {
		return false
	}
	for _, line := range via {
		for _, entry := range strings.Split(line, ",") {
			// received-protocol received-by [comment]
			f := strings.Fields(entry)
			if len(f) >= 2 && f[1] == instance {
				return true
			}
		}
	}
	return false
}

// isLoop reports whether resp is a hubproxy's refusal of a request that
// came back to it (508 LoopDetected): this proxy's or another's on the
// way, the loop is the same.
func isLoop(resp *http.Response) bool {
	return resp.StatusCode == http.StatusLoopDetected && resp.Header.Get("X-Error-Code") == "LoopDetected"
}
