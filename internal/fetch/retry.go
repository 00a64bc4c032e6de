package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// makeRequest builds a fresh request for one attempt on the attempt's context.
type makeRequest func(ctx context.Context) (*http.Request, error)

// send performs one hop of a call hubproxy chose itself, which the breaker
// hears of; see sendAs.
func (c *Client) send(ctx context.Context, retry bool, stall time.Duration, mk makeRequest) (*http.Response, *guard, error) {
	return c.sendAs(ctx, false, retry, stall, mk)
}

// sendAs performs one hop. It sends the request mk builds and, when retry is
// set, sends it again after a backoff on a network error, a 5xx or a 429, as
// long as attempts remain and ctx leaves time for the wait. Each attempt runs
// under its own stall guard (see guard; stall 0 means none).
//
// A call to the upstream origin first asks the breaker, which may refuse it
// (marked down) or hold it while a probe runs. Its outcome is reported to
// the breaker unless relay is set: a relayed client request says nothing
// about the upstream that a client could not choose (see breaker.go).
//
// The last response is returned whatever its status, with its guard; the
// caller must call guard.stop once done with the body. A transport failure
// comes back as a *netError (ErrUnavailable), or as the caller's own error if
// ctx was cancelled.
func (c *Client) sendAs(ctx context.Context, relay, retry bool, stall time.Duration, mk makeRequest) (*http.Response, *guard, error) {
	route := "" // the call's method and path, for the breaker; "" when it does not hear of the call
	for attempt := 0; ; attempt++ {
		actx, g := newGuard(ctx, stall)
		req, err := mk(actx)
		if err != nil {
			g.stop()
			return nil, nil, err
		}
		if attempt == 0 && c.sameOrigin(req.URL) {
			if err := c.breaker.allow(ctx); err != nil {
				g.stop()
				if ctx.Err() != nil {
					return nil, nil, transportErr(ctx, req.Method, redact(req.URL), err)
				}
				return nil, nil, &netError{method: req.Method, url: redact(req.URL), err: err}
			}
			if !relay {
				route = req.Method + " " + req.URL.EscapedPath()
			}
		}
		g.arm()
		resp, err := c.rt.RoundTrip(req)
		g.disarm()
		final := !retry || attempt >= c.retries
		if err != nil {
			err = transportErr(actx, req.Method, redact(req.URL), err)
			g.stop()
			if final || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
				c.outcome(route, ctx, nil, err)
				return nil, nil, err
			}
			if !c.wait(ctx, c.backoff(attempt)) {
				if ctx.Err() != nil {
					err = transportErr(ctx, req.Method, redact(req.URL), ctx.Err())
				}
				c.outcome(route, ctx, nil, err)
				return nil, nil, err
			}
			continue
		}
		if isLoop(resp) {
			// Our request came back to a hubproxy (this one, or one on
			// the way): no retry, and no outage for the breaker.
			g.discard(resp.Body)
			g.stop()
			if route != "" {
				c.breaker.answered(route)
			}
			return nil, nil, fmt.Errorf("fetch: %s %s: %w", req.Method, redact(req.URL), ErrLoop)
		}
		if final || !transient(resp.StatusCode) {
			c.outcome(route, ctx, resp, nil)
			return resp, g, nil
		}
		d := max(c.backoff(attempt), c.retryAfter(resp.Header.Get("Retry-After")))
		if !fits(ctx, d) {
			c.outcome(route, ctx, resp, nil)
			return resp, g, nil
		}
		g.discard(resp.Body)
		g.stop()
		if !c.wait(ctx, d) {
			err := transportErr(ctx, req.Method, redact(req.URL), ctx.Err())
			c.outcome(route, ctx, nil, err)
			return nil, nil, err
		}
	}
}

// outcome tells the breaker how a call on route ended: an answer below 500
// (429 included: the upstream is up, asking us to slow down) clears the
// route; a 5xx makes it a suspect; no answer at all suspects the upstream; a
// call its caller abandoned proves nothing either way. route "" is a call
// the breaker does not hear of.
func (c *Client) outcome(route string, ctx context.Context, resp *http.Response, err error) {
	switch {
	case route == "":
	case resp != nil && resp.StatusCode >= 500:
		c.breaker.failed(route, false, "status "+strconv.Itoa(resp.StatusCode))
	case resp != nil:
		c.breaker.answered(route)
	case errors.Is(err, ErrUnavailable) && (ctx.Err() == nil || isOwnTimeout(ctx)):
		c.breaker.failed(route, true, err.Error())
	}
}

// probe is the breaker's probe: HEAD of the upstream's base URL, once, with
// no credentials and nothing any client chose, so that no caller can decide
// its outcome. Any answer below 500 means the upstream is up.
func (c *Client) probe(ctx context.Context) error {
	req, err := c.newRequest(ctx, http.MethodHead, c.base, "", nil, "")
	if err != nil {
		return err
	}
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return transportErr(ctx, req.Method, redact(c.base), err)
	}
	discard(resp.Body)
	// A loop is answered at once with 508 by the proxy it returns to: the
	// upstream is up, only misconfigured, and each call says so (ErrLoop)
	// better than a breaker marked down would.
	if resp.StatusCode >= 500 && !isLoop(resp) {
		return fmt.Errorf("HEAD %s answered %d", redact(c.base), resp.StatusCode)
	}
	return nil
}

// isOwnTimeout reports whether ctx ended because of a deadline fetch set
// itself (MetadataTimeout): the upstream's fault, not the caller's.
func isOwnTimeout(ctx context.Context) bool {
	var te *timeoutError
	return errors.As(context.Cause(ctx), &te)
}

// transient reports the statuses worth another attempt: the upstream is
// failing or shedding load, and may answer next time.
func transient(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests
}

// backoff is the wait before retry number attempt+1: exponential from
// backoffMin, capped at backoffMax, with ±20% jitter so that many proxies
// do not retry in step.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.backoffMin
	for i := 0; i < attempt && d < c.backoffMax; i++ {
		d *= 2
	}
	d = min(d, c.backoffMax)
	if d <= 0 {
		return 0
	}
	jitter := time.Duration(rand.Int64N(int64(d)/5 + 1))
	if rand.IntN(2) == 0 {
		return d - jitter
	}
	return d + jitter
}

// retryAfter parses a Retry-After value (RFC 9110 §10.2.3: seconds or an
// HTTP date) and caps it, so that one upstream cannot park a request for long.
func (c *Client) retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	return max(0, min(d, c.retryAfterMax))
}

// fits reports whether ctx leaves time for a wait of d; a retry that could not
// start before the deadline is not worth waiting for.
func fits(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d
}

// wait sleeps for d unless ctx ends first or cannot outlast d. It reports
// whether the full wait happened.
func (c *Client) wait(ctx context.Context, d time.Duration) bool {
	if !fits(ctx, d) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// discard drains a little of body, so that the connection can be reused, and
// closes it.
func discard(body io.ReadCloser) {
	if body == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	body.Close()
}
