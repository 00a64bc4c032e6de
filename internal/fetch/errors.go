package fetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
)

// Sentinels. Match them with errors.Is; the concrete errors below wrap them.
var (
	// ErrUnavailable means the upstream could not answer: a network failure
	// (dial, reset, timeout, stall) or a 5xx/429 status that outlived the
	// retries. It is the one signal that falling back to the cache is allowed.
	ErrUnavailable = errors.New("upstream unavailable")
	// ErrExpired means a download URL from Resolve was refused with 401, 403
	// or 410, wherever it points (a CDN, or the hub's own host when it serves
	// the bytes itself): the signed URL has probably expired, and the caller
	// should resolve the file again (with the caller's own credentials, which
	// also tells whether access itself was lost) before giving up.
	ErrExpired = errors.New("download URL expired")
	// ErrStalled means a response made no progress for Options.StallTimeout.
	ErrStalled = errors.New("upstream stalled")
	// ErrLongBody means a range body carried more bytes than it promised.
	ErrLongBody = errors.New("upstream sent more bytes than the range asked for")
	// ErrRefused means upstream refused the caller the repo: 401, 403, or a
	// 404 RepoNotFound or GatedRepo (the Hub hides a repo it will not show
	// as missing). It is an answer about the credential, not about the
	// bytes, so the caller's grants end and no cached answer may stand in.
	// It matches a download's 401/403 too: when that outlives a fresh
	// resolve (ErrExpired), the credential itself was refused.
	ErrRefused = errors.New("upstream refused the caller")
)

// StatusError is an upstream answer with an error status. Its fields come
// from the hub's own error headers, so the server can pass them through
// (docs/hub-protocol.md §1c: clients map X-Error-Code to their exception types).
type StatusError struct {
	Code       int    // HTTP status from upstream
	ErrorCode  string // X-Error-Code (RepoNotFound, GatedRepo, EntryNotFound, RevisionNotFound, ...)
	Message    string // X-Error-Message, else the JSON body's "error", else http.StatusText
	RepoCommit string // X-Repo-Commit if present
	URL        string // redacted: no query string, no credentials

	// download is set when the answer was to a GetRange on a download URL,
	// where 401/403/410 mean an expired or revoked link, not an access
	// decision about the repo.
	download bool
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fetch: upstream answered %d", e.Code)
	if e.ErrorCode != "" {
		b.WriteString(" " + e.ErrorCode)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.URL != "" {
		b.WriteString(" (" + e.URL + ")")
	}
	return b.String()
}

// Is makes errors.Is(err, ErrUnavailable) true for 5xx and 429 (the upstream
// is down or shedding load, so a cached answer may stand in),
// errors.Is(err, ErrExpired) true for 401/403/410 answered to a download,
// errors.Is(err, ErrRefused) true for 401, 403 and the 404s that hide a repo,
// and errors.Is(err, fs.ErrNotExist) true for the hub's 404 EntryNotFound.
func (e *StatusError) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		// The hub's "no such file at this revision", so layers above can
		// say "missing" without knowing the hub's vocabulary.
		return e.Code == http.StatusNotFound && e.ErrorCode == "EntryNotFound"
	case ErrUnavailable:
		return e.Code >= 500 || e.Code == http.StatusTooManyRequests
	case ErrExpired:
		return e.download && (e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden || e.Code == http.StatusGone)
	case ErrRefused:
		return e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden ||
			e.Code == http.StatusNotFound && (e.ErrorCode == "RepoNotFound" || e.ErrorCode == "GatedRepo")
	}
	return false
}

// ProtocolError is an upstream answer that breaks the hub protocol: missing
// metadata headers, an unparsable Location, a redirect loop.
type ProtocolError struct{ URL, Reason string }

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("fetch: protocol error from %s: %s", e.URL, e.Reason)
}

// RangeError is a ranged GET whose answer is not exactly the bytes asked for:
// a 200 (the whole file), a different Content-Range, a Content-Length that
// disagrees, or an encoded body. No data is ever returned with it.
type RangeError struct {
	URL    string // redacted
	Want   string // the Content-Range expected, "bytes a-b/*"
	Got    string // what came back (Content-Range, Content-Length or encoding)
	Status int    // the HTTP status of the answer
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("fetch: bad range answer from %s: status %d, want %s, got %s", e.URL, e.Status, e.Want, e.Got)
}

// netError is a transport failure (dial, reset, timeout, stall). It matches
// ErrUnavailable and its cause. The cause is the transport's inner error, never
// *url.Error, whose text would carry the full URL and its signed query.
type netError struct {
	method, url string
	err         error
}

func (e *netError) Error() string {
	return fmt.Sprintf("fetch: %s %s: upstream unavailable: %v", e.method, e.url, e.err)
}

func (e *netError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// timeoutError is the cause of a deadline fetch sets itself (MetadataTimeout).
// Its expiry means the upstream is slow, not that the caller gave up. It
// matches context.DeadlineExceeded.
type timeoutError struct{ what string }

func (e *timeoutError) Error() string        { return e.what }
func (e *timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// transportErr classifies a failed round trip on ctx (the attempt's context).
// A stall or one of fetch's own timeouts is the upstream's fault and matches
// ErrUnavailable; a cancellation by the caller is returned as the caller's
// cause and does not, so it never triggers a cache fallback or a retry.
func transportErr(ctx context.Context, method, redactedURL string, err error) error {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		var te *timeoutError
		if errors.Is(cause, ErrStalled) || errors.As(cause, &te) {
			return &netError{method: method, url: redactedURL, err: cause}
		}
		return fmt.Errorf("fetch: %s %s: %w", method, redactedURL, cause)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &netError{method: method, url: redactedURL, err: err}
}

// redact renders u for an error message: no userinfo, query or fragment, so
// neither credentials nor a CDN signature can leak through error text.
func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	r := *u
	r.User = nil
	r.RawQuery = ""
	r.ForceQuery = false
	r.Fragment = ""
	r.RawFragment = ""
	return r.String()
}

// maxErrorBody bounds how much of an error body is read for its message.
const maxErrorBody = 64 << 10

// maxMessage bounds upstream-supplied text copied into an error.
const maxMessage = 512

// newStatusError builds a StatusError from resp, reading at most 64 KiB of
// the body for a JSON "error" message, and closes the body. Upstream text is
// clipped and scrubbed of the request's secrets before it reaches an error.
func newStatusError(resp *http.Response, u *url.URL, download bool, secrets []string) *StatusError {
	e := &StatusError{
		Code:       resp.StatusCode,
		ErrorCode:  clean(resp.Header.Get("X-Error-Code"), 64, secrets),
		RepoCommit: clean(resp.Header.Get("X-Repo-Commit"), 64, secrets),
		URL:        redact(u),
		download:   download,
	}
	e.Message = clean(resp.Header.Get("X-Error-Message"), maxMessage, secrets)
	if e.Message == "" && resp.Body != nil {
		var body struct {
			Error string `json:"error"`
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if json.Unmarshal(data, &body) == nil {
			e.Message = clean(body.Error, maxMessage, secrets)
		}
	}
	if resp.Body != nil {
		resp.Body.Close()
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// clean makes upstream-supplied text safe to put in an error: secrets are
// replaced, control characters dropped, and the length bounded.
func clean(s string, limit int, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "[REDACTED]")
		}
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return s
}
