package soak

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// The proxies' decision windows (proxy.go passes them as flags).
const (
	accessTTL   = 5 * time.Second
	revisionTTL = 3 * time.Second
	// lateness is how long after the hub decided the proxy may stamp the
	// answer it got (its cached decision's clock starts then): the hub's
	// answer crossing the relay and reaching the proxy's resolver on a
	// loaded two-core machine. The oracle allows access-ttl plus this, and
	// no more; the report shows how much of it answers used.
	lateness = 2 * time.Second
	// hardTimeout is when a client gives up on an answer: any request
	// still running then is a hung request, a failure (every proxy timeout
	// is far shorter).
	hardTimeout = 90 * time.Second
)

// outcome is how a response fared.
type outcome int

const (
	outServed      outcome = iota // the right bytes
	outRefused                    // the hub's refusal, rightly relayed
	outMissing                    // EntryNotFound, rightly
	outUnavailable                // 502/503/504, a broken connection or a body cut short
	outViolation                  // wrong
)

func (o outcome) String() string {
	return [...]string{"served", "refused", "missing", "unavailable", "violation"}[o]
}

// judgement is the oracle's finding about one response.
type judgement struct {
	out    outcome
	class  string // for violations: wrong-bytes, access, status, hung; for unavailability: its cause
	detail string
	stale  bool // a branch answered with a commit older than its window (the cache's refs/ while upstream was down)
	late   time.Duration
}

func served() judgement { return judgement{out: outServed} }

func violation(class, format string, args ...any) judgement {
	return judgement{out: outViolation, class: class, detail: fmt.Sprintf(format, args...)}
}

func unavailable(class string) judgement { return judgement{out: outUnavailable, class: class} }

// result is one response as the client saw it.
type result struct {
	op                  *op
	proxy               string
	sent, headers, done time.Time
	err                 error // before the headers
	status              int
	header              http.Header
	body                []byte
	bodyErr             error // reading the body failed: it is incomplete
	// The body's pace (gaps.go): the wait for its first byte, the longest
	// wait between bytes after it, and the longest the client went without
	// a byte, a short body's wait until it ended included.
	firstByte, maxGap, stall time.Duration
}

// oracle judges responses against the world and the hub's history.
type oracle struct {
	w    *world
	hist *history
}

// judge decides whether r is an answer the hub's own behaviour allows.
func (o *oracle) judge(r *result) judgement {
	op := r.op
	if r.err != nil {
		if r.done.Sub(r.sent) >= hardTimeout-time.Second {
			return violation("hung", "no answer within %s: %v", hardTimeout, r.err)
		}
		return unavailable("connection")
	}
	if r.bodyErr != nil && r.done.Sub(r.sent) >= hardTimeout-time.Second {
		return violation("hung", "body still running after %s: %v", hardTimeout, r.bodyErr)
	}
	if op.kind == opBait {
		return judgeBait(r)
	}
	if r.status == http.StatusBadGateway && strings.Contains(r.header.Get("X-Error-Message"), "does not match its hash") &&
		!o.mayBeCorrupt(op) {
		return violation("wrong-bytes", "502 %q for a file upstream never corrupts", r.header.Get("X-Error-Message"))
	}
	// The hub's answers to this caller in the window: about the repo's
	// files for a content route, about its metadata (public for a gated
	// repo) for a metadata route.
	from := r.sent.Add(-accessTTL - lateness)
	vs := o.hist.verdicts(op.caller, op.repo, op.kind.content(), from, r.headers)
	refused := !containsVerdict(vs, verdict{allowed: true}) // throughout the window
	code := r.header.Get("X-Error-Code")
	switch r.status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if refused {
			if j, leak := leaks(r, vs); leak {
				return j
			}
		}
		return unavailable(fmt.Sprintf("%d %s", r.status, code))
	}
	if r.status >= 500 {
		return violation("status", "%d %s: %s", r.status, code, r.header.Get("X-Error-Message"))
	}
	if code == "GatedRepo" || code == "RepoNotFound" {
		if !containsVerdict(vs, verdict{status: r.status, code: code}) {
			return violation("status", "refused %d %s; the hub's answers in the window: %v", r.status, code, vs)
		}
		if j, leak := leaks(r, vs); refused && leak {
			return j
		}
		return judgement{out: outRefused}
	}
	if refused {
		switch {
		case r.status < 300:
			return violation("access", "%d with content to a caller the hub refused throughout the window (%s to %s): %v",
				r.status, from.Format(clock), r.headers.Format(clock), vs)
		case r.status < 400 || r.status == http.StatusRequestedRangeNotSatisfiable || code == "EntryNotFound" || code == "RevisionNotFound":
			// The Hub checks the repo before the revision and the path:
			// a refused caller never learns whether either exists.
			return violation("access", "%d %s to a caller the hub refused throughout the window (%v): it tells what exists",
				r.status, code, vs)
		}
		return violation("status", "%d %s to a caller the hub refuses (%v)", r.status, code, vs)
	}
	j := o.check(r)
	if j.out != outViolation && r.status < 300 && len(vs) > 1 {
		j.late = o.lateness(op.caller, op.repo, op.kind.content(), r.sent, r.headers)
	}
	return j
}

// leakHeaders are the headers that tell about a file or a commit: what a
// refusal (or an outage's 503) to a caller the hub refuses must not carry.
var leakHeaders = []string{"X-Repo-Commit", "ETag", "X-Linked-Etag", "X-Linked-Size", "Content-Range", "X-Tensor-Dtype", "X-Tensor-Shape"}

// leaks finds a header in a refusal or an unavailability answer that tells
// a refused caller what the repo holds: its size, etag or commit.
func leaks(r *result, vs []verdict) (judgement, bool) {
	for _, h := range leakHeaders {
		if v := r.header.Get(h); v != "" {
			return violation("access", "%d %s carries %s: %s to a caller the hub refused throughout the window (%v)",
				r.status, r.header.Get("X-Error-Code"), h, v, vs), true
		}
	}
	return judgement{}, false
}

// judgeBait judges the answer to a pass-through POST that upstream answers
// 500: any refusal or failure is right (hubproxy relays it, or refuses the
// route), as is an outage's unavailability; a 2xx is not what upstream said.
func judgeBait(r *result) judgement {
	switch {
	case r.status < 300:
		return violation("status", "%d for a pass-through POST upstream answers 500", r.status)
	case r.status == http.StatusServiceUnavailable || r.status == http.StatusGatewayTimeout:
		return unavailable(fmt.Sprintf("%d %s", r.status, r.header.Get("X-Error-Code")))
	}
	return judgement{out: outRefused}
}

// mayBeCorrupt reports whether op reads the one file CorruptBytes hits.
func (o *oracle) mayBeCorrupt(op *op) bool {
	for _, f := range op.files {
		if op.repo.String()+"/"+f == o.w.corruptKey {
			return true
		}
	}
	return false
}

// clock formats times in violation details.
const clock = "15:04:05.000"

// lateness measures how far into the allowance an allowed answer was: how
// long before its request the hub last allowed the caller, beyond
// access-ttl. It is reported, not judged (judge already did).
func (o *oracle) lateness(caller string, repo hub.Repo, content bool, sent, headers time.Time) time.Duration {
	allowed := verdict{allowed: true}
	if containsVerdict(o.hist.verdicts(caller, repo, content, sent, headers), allowed) {
		return 0
	}
	for d := 100 * time.Millisecond; d <= accessTTL+lateness; d += 100 * time.Millisecond {
		if containsVerdict(o.hist.verdicts(caller, repo, content, sent.Add(-d), sent.Add(-d)), allowed) {
			return max(0, d-accessTTL)
		}
	}
	return lateness
}

// commitsFor returns the commits an allowed answer to op may be about: the
// revision itself for a commit id, else every head of main in the revision
// window; stale are the older heads an answer from the cache's refs/ may
// name while upstream is down.
func (o *oracle) commitsFor(r *result) (fresh []string, stale func(string) bool) {
	op := r.op
	if hub.IsCommit(op.rev) {
		return []string{op.rev}, func(string) bool { return false }
	}
	fresh = o.hist.heads(op.repo, r.sent.Add(-revisionTTL-lateness), r.headers)
	return fresh, func(c string) bool { return o.hist.everHead(op.repo, c, r.headers) }
}

// namedCommit checks the commit an answer names (X-Repo-Commit, or a JSON
// field) and returns it.
func (o *oracle) namedCommit(r *result, named string) (*commitFix, judgement) {
	fresh, stale := o.commitsFor(r)
	c := o.w.commit(named)
	switch {
	case c == nil || c.repo != r.op.repo:
		return nil, violation("status", "names commit %q, which %s does not have (expected one of %v)", named, r.op.repo, fresh)
	case containsString(fresh, named):
		return c, served()
	case stale(named):
		return c, judgement{out: outServed, stale: true}
	}
	return nil, violation("status", "names commit %s, not one of %s's heads in the window %v", named, r.op.rev, fresh)
}

// check applies op's own checks to an answer the caller was allowed.
func (o *oracle) check(r *result) judgement {
	if r.op.rev == noSuchRev {
		if r.status == http.StatusNotFound && r.header.Get("X-Error-Code") == "RevisionNotFound" {
			return judgement{out: outMissing}
		}
		return violation("status", "%d %s for a branch the repo does not have", r.status, r.header.Get("X-Error-Code"))
	}
	switch r.op.kind {
	case opWhole, opRange, opHead, opMissing:
		return o.checkFile(r)
	case opTensor, opShard:
		return o.checkTensor(r)
	case opSubset:
		return o.checkSubset(r)
	case opListing:
		return o.checkListing(r)
	case opInfo:
		return o.checkInfo(r)
	case opTree:
		return o.checkTree(r)
	case opPathsInfo:
		return o.checkPathsInfo(r)
	}
	return violation("status", "unknown op %v", r.op.kind)
}

// entryNotFound judges a 404 EntryNotFound: right if the file is missing at
// a commit the answer may be about.
func (o *oracle) entryNotFound(r *result, present func(*commitFix) bool) judgement {
	named := r.header.Get("X-Repo-Commit")
	fresh, stale := o.commitsFor(r)
	if named != "" {
		c, j := o.namedCommit(r, named)
		if j.out == outViolation {
			return j
		}
		if present(c) {
			return violation("status", "EntryNotFound at %s, which has it", named)
		}
		j.out = outMissing
		return j
	}
	for _, id := range fresh {
		if c := o.w.commit(id); c != nil && !present(c) {
			return judgement{out: outMissing}
		}
	}
	_ = stale
	return violation("status", "EntryNotFound without a commit, and every commit of the window %v has it", fresh)
}

// bodyCut reports whether the body broke off, and how: that is
// unavailability, provided the bytes that did arrive are right (checked by
// the callers).
func bodyCut(r *result) bool { return r.bodyErr != nil && !errors.Is(r.bodyErr, errTooLong) }

// errTooLong marks a body longer than the op could ever need.
var errTooLong = errors.New("body longer than any right answer")

// mismatchAt is the first offset where got and want differ, or -1.
func mismatchAt(got, want []byte) int {
	n := min(len(got), len(want))
	for i := range n {
		if got[i] != want[i] {
			return i
		}
	}
	if len(got) > len(want) {
		return len(want)
	}
	return -1
}
