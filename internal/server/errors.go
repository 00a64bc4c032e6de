package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
	"github.com/hubproxy/hubproxy/internal/tensor"
)

// httpError is an error as the client sees it: hub clients read the status,
// X-Error-Code, X-Error-Message and a JSON {"error": …} body
// (docs/hub-protocol.md §1c, §5).
type httpError struct {
	status int
	code   string // X-Error-Code; the hub's vocabulary
	msg    string
	commit string // X-Repo-Commit, set on a missing file so clients cache the miss
	// contentRange is Content-Range, "bytes */size" on a 416 (RFC 9110 §15.5.17).
	contentRange string
}

// errorRule maps one kind of error to its answer: the first rule whose
// match accepts an error decides. status and code are fixed per rule (so the
// table can be checked against api/openapi.yaml); answer, when set, builds
// the rest from the error (its message, or a relayed hub answer).
type errorRule struct {
	name   string // for tests and humans
	match  func(error) bool
	status int    // 0: answer decides
	code   string // X-Error-Code; every rule has one, except a relayed one
	msg    string // fixed message, when answer is nil
	answer func(error) httpError
	// relayed rules answer with the hub's own status and code, as it sent
	// them (possibly none), so that clients raise what the hub's answer
	// would have raised; they alone have no code of their own.
	relayed bool
}

// as reports whether err holds a *T, for the table's matchers.
func as[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

// message answers with the error's own text, which these errors keep safe to
// show (they name the rule or input at fault, never internal state).
func message(err error) httpError { return httpError{msg: err.Error()} }

// errorRules is the one error→HTTP mapping, in order of precedence. Another
// listener puts rows of its own ahead of these (Plumbing).
var errorRules = []errorRule{
	{name: "invalid input", match: as[*hub.InvalidError], status: http.StatusBadRequest, code: "BadRequest", answer: message},
	{name: "token required", match: is(errNotAdmitted), status: http.StatusUnauthorized, code: "TokenRequired", answer: message},
	{name: "repo not allowed", match: as[*repoRefusedError], status: http.StatusForbidden, code: "RepoNotAllowed", answer: message},
	{name: "method not allowed", match: as[*methodError], status: http.StatusMethodNotAllowed, code: "MethodNotAllowed",
		answer: func(err error) httpError {
			var me *methodError
			errors.As(err, &me)
			return httpError{msg: "method not allowed; use " + me.allow}
		}},
	{name: "body too large", match: as[*tooLargeError], status: http.StatusRequestEntityTooLarge, code: "BadRequest", answer: message},
	{name: "bad request", match: as[*requestError], status: http.StatusBadRequest, code: "BadRequest", answer: message},
	{name: "bad tensor spec", match: as[*tensor.SpecError], status: http.StatusBadRequest, code: "BadRequest", answer: message},
	{name: "no such tensor", match: as[*tensor.NotFoundError], status: http.StatusNotFound, code: "EntryNotFound", answer: message},
	{name: "too many ranges", match: as[*rangeLimitError], status: http.StatusRequestedRangeNotSatisfiable, code: "RangeNotSatisfiable",
		answer: func(err error) httpError {
			var re *rangeLimitError
			errors.As(err, &re)
			return httpError{msg: re.Error(), contentRange: "bytes */" + strconv.FormatInt(re.size, 10)}
		}},
	{name: "no route", match: is(hub.ErrNoRoute), status: http.StatusNotFound, code: "EntryNotFound", msg: "no such route"},
	// Before every upstream rule: a request that came back to this proxy,
	// or an upstream call that came back to one on the way, is a setting
	// to fix, whatever read it was part of.
	{name: "loop", match: is(fetch.ErrLoop), status: http.StatusLoopDetected, code: "LoopDetected",
		msg: "hubproxy's upstream points back at itself (directly or through other proxies): check its upstream setting"},
	{name: "hub refusal", match: func(err error) bool {
		var se *fetch.StatusError
		return errors.As(err, &se) && se.Code < 500 && se.Code != http.StatusTooManyRequests
	}, relayed: true, answer: func(err error) httpError {
		// The hub's own 4xx, relayed with its code, so clients raise the
		// exception they would have raised talking to the hub.
		var se *fetch.StatusError
		errors.As(err, &se)
		return httpError{status: se.Code, code: se.ErrorCode, msg: se.Message, commit: se.RepoCommit}
	}},
	{name: "offline", match: is(resolver.ErrOffline), status: http.StatusGatewayTimeout, code: "Offline",
		msg: "hubproxy is in offline mode and does not hold this file"},
	{name: "unverifiable", match: is(resolver.ErrUnverifiable), status: http.StatusServiceUnavailable, code: "Unverifiable",
		msg: "upstream is unavailable and nothing it said covers you for this repo, so access cannot be checked"},
	{name: "hub failure", match: as[*fetch.StatusError], status: http.StatusBadGateway, code: "UpstreamError", answer: func(err error) httpError {
		var se *fetch.StatusError
		errors.As(err, &se)
		return httpError{msg: "upstream answered " + http.StatusText(se.Code)}
	}},
	{name: "hash mismatch", match: as[*cache.VerifyError], status: http.StatusBadGateway, code: "UpstreamHashMismatch",
		msg: "upstream sent content that does not match its hash; it was discarded"},
	{name: "protocol", match: func(err error) bool { return as[*fetch.ProtocolError](err) || as[*fetch.RangeError](err) },
		status: http.StatusBadGateway, code: "UpstreamProtocolError", msg: "upstream sent an invalid response"},
	{name: "uncacheable", match: is(cache.ErrUncacheable), status: http.StatusBadGateway, code: "Uncacheable",
		msg: "upstream gave this file no content hash (ETag); it can only be downloaded whole"},
	{name: "invalid safetensors", match: func(err error) bool {
		// A file upstream that breaks the safetensors rules, not a fetch
		// that failed while reading it.
		return as[*tensor.FileError](err) && !errors.Is(err, context.Canceled) &&
			!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, fetch.ErrUnavailable)
	}, status: http.StatusBadGateway, code: "InvalidSafetensors", answer: message},
	{name: "upstream cut short", match: func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, fetch.ErrLongBody) },
		status: http.StatusBadGateway, code: "UpstreamCutShort", msg: "upstream's answer broke off or ran long; nothing of it was kept"},
	{name: "timeout", match: is(context.DeadlineExceeded), status: http.StatusGatewayTimeout, code: "UpstreamTimeout", msg: "upstream timed out"},
	{name: "upstream unavailable", match: func(err error) bool { return errors.Is(err, fetch.ErrUnavailable) || errors.Is(err, fetch.ErrStalled) },
		status: http.StatusBadGateway, code: "UpstreamUnavailable", msg: "upstream unavailable"},
}

// ErrorRule is a row another listener adds to the error table for errors
// of its own (the admin listener's GPU errors): an error it matches is
// answered with Status, Code (X-Error-Code; "" for none) and the error's own
// text, which such errors must keep safe to show.
type ErrorRule struct {
	Name   string // for tests and humans
	Match  func(error) bool
	Status int
	Code   string
}

// ErrorWriter answers a request with an error, as writeError does.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error)

// Plumbing sets mux up as another listener of this server (the admin
// listener): its requests get the same request ids, access log lines and
// metrics, its router's own 404 and 405 answers take the shape of every
// other error, and its errors are answered by the returned writer from one
// table: rules first, then this server's own. That listener's errors are
// thus mapped in exactly one place too, and the errors it shares with this
// one (bad input, refused repos, upstream failures while reading a tensor)
// are answered the same on both.
func (s *Server) Plumbing(mux *chi.Mux, rules ...ErrorRule) ErrorWriter {
	table := make([]errorRule, 0, len(rules)+len(errorRules))
	for _, r := range rules {
		table = append(table, errorRule{name: r.Name, match: r.Match, status: r.Status, code: r.Code, answer: message})
	}
	table = append(table, errorRules...)
	write := func(w http.ResponseWriter, r *http.Request, err error) { s.writeErrorFrom(table, w, r, err) }
	mux.Use(s.requestID, s.accessLog)
	routeErrors(mux, write)
	return write
}

// toHTTPError maps every error the handlers can meet to its answer, by the
// first matching rule of table (errorRules, or a listener's from Plumbing).
// It is the only place that does so, and it never puts internal text in a
// response to an error it does not recognise.
func toHTTPError(table []errorRule, err error) httpError {
	for _, r := range table {
		if !r.match(err) {
			continue
		}
		he := httpError{msg: r.msg}
		if r.answer != nil {
			he = r.answer(err)
		}
		if r.status != 0 {
			he.status = r.status
		}
		if r.code != "" {
			he.code = r.code
		}
		return he
	}
	return httpError{status: http.StatusInternalServerError, code: "InternalError", msg: "internal error"}
}

// writeError answers r with err. Errors after the body started cannot be
// reported; the handlers abort those connections instead.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeErrorFrom(errorRules, w, r, err)
}

func (s *Server) writeErrorFrom(table []errorRule, w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client is gone
	}
	he := toHTTPError(table, err)
	if he.status >= 500 {
		s.log.Warn("request failed", "id", w.Header().Get("X-Request-Id"), "path", r.URL.EscapedPath(), "status", he.status, "err", err)
	}
	if he.msg == "" {
		he.msg = http.StatusText(he.status)
	}
	h := w.Header()
	for _, k := range []string{"Content-Length", "Content-Range", "Content-Disposition", "ETag", "X-Linked-Etag", "X-Linked-Size", "Accept-Ranges", "X-Hubproxy-Cache"} {
		h.Del(k)
	}
	if he.code != "" {
		h.Set("X-Error-Code", he.code)
	}
	h.Set("X-Error-Message", oneLine(he.msg))
	if he.commit != "" {
		h.Set("X-Repo-Commit", he.commit)
	}
	if he.contentRange != "" {
		h.Set("Content-Range", he.contentRange)
	}
	var me *methodError
	if errors.As(err, &me) {
		h.Set("Allow", me.allow)
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(he.status)
	if r.Method != http.MethodHead {
		json.NewEncoder(w).Encode(map[string]string{"error": he.msg})
	}
}

func oneLine(s string) string {
	s = strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f {
			return ' '
		}
		return c
	}, s)
	if len(s) > 512 {
		s = s[:512]
	}
	return s
}

// methodError is a method a route does not serve: 405 with Allow.
type methodError struct{ allow string }

func (e *methodError) Error() string { return "method not allowed" }

// tooLargeError is a request body over the route's limit: 413.
type tooLargeError struct{ limit int }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("request body larger than %d bytes", e.limit)
}
