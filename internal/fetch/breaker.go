package fetch

// The breaker remembers an upstream outage so that, while it lasts, callers
// get the cache at cache speed instead of paying a timeout each. It used to
// open on the first failed call to the upstream, any call, which let any
// client open it at will: a POST relayed to an /api/ route that answers 500,
// re-sent as each probe, kept the whole process answering "upstream down"
// while the hub was up. The rule now:
//
//   - Only calls whose method and route hubproxy chose itself are heard:
//     Resolve's HEADs, GetRange's GETs on the upstream host, Visibility, Ping,
//     and API, which serves the cached JSON routes (repo info and tree by GET,
//     paths-info by POST). Those routes are client-triggered and carry the
//     client's repo, revision and query, just as a resolve carries the
//     client's file name; they count because hubproxy falls back to the cache
//     for exactly these calls, and the rules below, not the caller, decide.
//     Relay (the uncached pass-through of any other /api/ request, method and
//     body the client's) is never heard and never serves as a probe.
//   - A failure is only a suspicion. No answer at all (refused, reset, a
//     timeout) suspects the host at once. A 5xx is an answer about one route,
//     and a client can name a route that fails, so it suspects the host only
//     once suspectRoutes distinct routes (method and path, query aside) have
//     answered 5xx within suspectWindow; the same route failing again and
//     again is one route.
//   - A suspicion is settled by a probe whose target hubproxy chose: HEAD of
//     the upstream's base URL, with no credentials and nothing from any
//     client, sent once. Only a failed probe (no answer, or 5xx) opens the
//     breaker; calls that arrive while it is in flight wait for its verdict.
//   - A probe that finds the upstream answering clears the suspicion and
//     quiets new ones for a cool-down, so clients cannot make hubproxy probe
//     more than once per cool-down either.
//   - While open, every call fails at once (relays too). After the cool-down
//     the next call starts the probe, never sends itself as one; each failed
//     probe doubles the cool-down, up to maxCooldown.
//
// The open/closed state and its cool-downs are internal/breaker's state
// machine (sharedfill's store breaker is the same one); what is heard, the
// suspicion and the probe are this file's policy.
//
// A 4xx, 429 included, is an answer: the upstream is up, it just said no (or
// "slow down", which the retries honour). The cost of the rule: a hub whose
// front page answers while its file routes all fail 5xx is not marked down;
// each request then learns that itself (retries included) and falls back to
// the cache, slower but never wrongly.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/breaker"
)

// Defaults for the breaker's cool-down, doubled after every failed probe.
const (
	defaultCooldown    = 5 * time.Second
	defaultCooldownMax = time.Minute
)

// How many distinct routes must answer 5xx, and within how long, before a
// probe is asked whether the upstream itself is failing.
const (
	suspectRoutes = 3
	suspectWindow = 30 * time.Second
)

// errMarkedDown is the cause of a call refused without being sent, because
// the upstream failed recently and its cool-down has not ended. It matches
// ErrUnavailable through netError, so callers fall back to the cache at
// cache speed rather than paying a timeout per request.
var errMarkedDown = errors.New("upstream marked down after recent failures")

// probeFunc asks the upstream whether it answers at all; nil means it did.
// It must bound itself only by ctx.
type probeFunc func(ctx context.Context) error

// upstreamBreaker is the upstream's breaker: the state machine (state) and
// the policy above around it.
type upstreamBreaker struct {
	// Immutable after newBreaker.
	cooldown     time.Duration
	probeTimeout time.Duration
	probe        probeFunc
	now          func() time.Time // the clock of state too; tests set it
	log          *slog.Logger

	mu sync.Mutex
	// Guarded by mu.
	state    *breaker.Breaker     // open or closed, and the cool-down
	last     time.Time            // when a call or probe last had an outcome
	flight   chan struct{}        // non-nil while a probe runs; closed at its verdict
	suspects map[string]time.Time // routes that answered 5xx lately, while closed
	quiet    time.Time            // no probe is started for a suspicion before this
}

func newBreaker(cooldown, probeTimeout time.Duration, probe probeFunc, now func() time.Time, log *slog.Logger) *upstreamBreaker {
	if cooldown <= 0 {
		cooldown = defaultCooldown
	}
	if now == nil {
		now = time.Now
	}
	b := &upstreamBreaker{cooldown: cooldown, probeTimeout: probeTimeout, probe: probe, now: now, log: log,
		suspects: map[string]time.Time{}}
	// Through b.now, so that a test's clock set after newBreaker is the
	// state's too.
	b.state = breaker.New(cooldown, max(cooldown, defaultCooldownMax), func() time.Time { return b.now() })
	return b
}

// allow reports whether a call may be sent now. It waits (as long as ctx
// lets it) for a probe in flight; while open it refuses, except that the
// first call after the cool-down starts a probe and waits for it.
func (b *upstreamBreaker) allow(ctx context.Context) error {
	for {
		b.mu.Lock()
		f := b.flight
		switch {
		case f != nil:
		case !b.state.Open():
			b.mu.Unlock()
			return nil
		case !b.state.Ready():
			err := fmt.Errorf("%w (%s); next try in %s", errMarkedDown, b.state.State().Reason,
				b.state.Left().Round(time.Second))
			b.mu.Unlock()
			return err
		default:
			f = b.startProbe("the cool-down ended")
		}
		b.mu.Unlock()
		select {
		case <-f:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// check runs a probe now (or joins the one in flight) unless the upstream is
// marked down and its cool-down has not ended, and reports the verdict.
func (b *upstreamBreaker) check(ctx context.Context) error {
	b.mu.Lock()
	f := b.flight
	if f == nil {
		if !b.state.Ready() {
			reason := b.state.State().Reason
			b.mu.Unlock()
			return fmt.Errorf("%w (%s)", errMarkedDown, reason)
		}
		f = b.startProbe("a health check")
	}
	b.mu.Unlock()
	select {
	case <-f:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Open() {
		return fmt.Errorf("%w (%s)", errMarkedDown, b.state.State().Reason)
	}
	return nil
}

// answered records that the upstream answered a call on route (any status
// below 500): that route is no longer a suspect.
func (b *upstreamBreaker) answered(route string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = b.now()
	delete(b.suspects, route)
}

// failed records that a call on route got no answer (noAnswer) or a 5xx,
// and starts a probe when that makes the upstream itself a suspect. reason
// says why, for the log and Health.
func (b *upstreamBreaker) failed(route string, noAnswer bool, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.last = now
	if b.state.Open() || b.flight != nil {
		return // a call sent before the breaker opened, or a verdict is coming
	}
	if !noAnswer {
		b.suspect(route, now)
		reason = fmt.Sprintf("%s (%d routes failing)", reason, len(b.suspects))
	}
	if now.Before(b.quiet) || !noAnswer && len(b.suspects) < suspectRoutes {
		return
	}
	b.startProbe(reason)
}

// suspect adds route to the recent 5xx routes, dropping those older than
// the window and, past suspectRoutes, the oldest: the set stays small
// whatever names callers use. mu must be held.
func (b *upstreamBreaker) suspect(route string, now time.Time) {
	oldest := ""
	for r, at := range b.suspects {
		if now.Sub(at) > suspectWindow {
			delete(b.suspects, r)
		} else if oldest == "" || at.Before(b.suspects[oldest]) {
			oldest = r
		}
	}
	if _, ok := b.suspects[route]; !ok && len(b.suspects) >= suspectRoutes {
		delete(b.suspects, oldest)
	}
	b.suspects[route] = now
}

// startProbe sends the probe in the background, so that no one caller's
// context decides it, and returns the channel closed at its verdict. mu
// must be held and no probe be in flight.
func (b *upstreamBreaker) startProbe(why string) chan struct{} {
	f := make(chan struct{})
	b.flight = f
	go func() {
		defer close(f)
		ctx, cancel := context.WithTimeoutCause(context.Background(), b.probeTimeout,
			&timeoutError{what: fmt.Sprintf("no answer within %s", b.probeTimeout)})
		err := b.probe(ctx)
		cancel()
		b.verdict(why, err)
	}()
	return f
}

// verdict applies a probe's outcome: err nil means the upstream answered.
func (b *upstreamBreaker) verdict(why string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.flight, b.last = nil, now
	clear(b.suspects)
	if err == nil {
		b.quiet = now.Add(b.cooldown)
		if downFor, closed := b.state.Succeed(); closed {
			b.log.Info("upstream is answering again", "down_for", downFor.Round(time.Millisecond).String())
		} else {
			b.log.Info("upstream calls failed, but the upstream answers its probe; not marking it down", "reason", why)
		}
		return
	}
	if b.state.Fail(fmt.Sprintf("%s; probe: %v", why, err)) {
		b.log.Warn("upstream unavailable; answering from the cache until it is back", "reason", why,
			"probe", err.Error(), "retry_in", b.cooldown.String())
	}
}

// Health is what the client last learnt about the upstream.
type Health struct {
	Up      bool      // false while the breaker is open
	Since   time.Time // when the current state began
	Reason  string    // why the upstream is considered down
	Checked time.Time // when a call last told (zero: none yet)
}

func (b *upstreamBreaker) health() Health {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.state.State()
	return Health{Up: !st.Open, Since: st.Since, Reason: st.Reason, Checked: b.last}
}
