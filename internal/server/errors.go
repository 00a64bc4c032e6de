package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
	"github.com/hubproxy/hubproxy/internal/tensor"
)

// httpError is an error as the client sees it: hub clients read the status,
// X-Error-Code, X-Error-Message and a JSON {"error": …} body
// (HUB-PROTOCOL.md §1c, §5).
type httpError struct {
	status int
	code   string // X-Error-Code; the hub's vocabulary
	msg    string
	commit string // X-Repo-Commit, set on a missing file so clients cache the miss
}

// toHTTPError maps every error the handlers can meet to its answer. It is the
// only place that does so, and it never puts internal text in a response to
// an error it does not recognise.
func toHTTPError(err error) httpError {
	var (
		inv    *hub.InvalidError
		status *fetch.StatusError
		verify *cache.VerifyError
		proto  *fetch.ProtocolError
		rng    *fetch.RangeError
		req    *requestError
		method *methodError
		big    *tooLargeError
		nf     *tensor.NotFoundError
		fileE  *tensor.FileError
		drv    *gpu.DriverError
		refuse *repoRefusedError
	)
	switch {
	case errors.As(err, &inv):
		return httpError{status: http.StatusBadRequest, code: "BadRequest", msg: inv.Error()}
	case errors.Is(err, errNotAdmitted):
		return httpError{status: http.StatusUnauthorized, code: "TokenRequired", msg: err.Error()}
	case errors.As(err, &refuse):
		return httpError{status: http.StatusForbidden, code: "RepoNotAllowed", msg: refuse.Error()}
	case errors.As(err, &method):
		return httpError{status: http.StatusMethodNotAllowed, code: "MethodNotAllowed", msg: "method not allowed; use " + method.allow}
	case errors.As(err, &big):
		return httpError{status: http.StatusRequestEntityTooLarge, code: "BadRequest", msg: big.Error()}
	case errors.As(err, &req):
		return httpError{status: http.StatusBadRequest, code: "BadRequest", msg: req.msg}
	case errors.As(err, &nf):
		return httpError{status: http.StatusNotFound, code: "EntryNotFound", msg: nf.Error()}
	case errors.Is(err, gpu.ErrUnavailable):
		return httpError{status: http.StatusServiceUnavailable, code: "GPUUnavailable", msg: err.Error()}
	case errors.Is(err, gpu.ErrBadDevice), errors.Is(err, gpu.ErrBadRequest):
		return httpError{status: http.StatusBadRequest, code: "BadRequest", msg: err.Error()}
	case errors.Is(err, gpu.ErrBudget), errors.As(err, &drv) && drv.Code == 2: // CUDA_ERROR_OUT_OF_MEMORY
		return httpError{status: http.StatusInsufficientStorage, code: "GPUMemory", msg: err.Error()}
	case errors.As(err, &drv):
		return httpError{status: http.StatusInternalServerError, code: "GPUDriver", msg: drv.Error()}
	case errors.Is(err, errNoRoute):
		return httpError{status: http.StatusNotFound, code: "EntryNotFound", msg: "no such route"}
	case errors.As(err, &status) && status.Code < 500 && status.Code != http.StatusTooManyRequests:
		return httpError{status: status.Code, code: status.ErrorCode, msg: status.Message, commit: status.RepoCommit}
	case errors.Is(err, resolver.ErrOffline):
		return httpError{status: http.StatusGatewayTimeout, code: "Offline", msg: "hubproxy is in offline mode and does not hold this file"}
	case errors.Is(err, resolver.ErrUnverifiable):
		return httpError{status: http.StatusServiceUnavailable, code: "Unverifiable", msg: "upstream is unreachable and this repo is not known to be public, so access cannot be checked"}
	case errors.As(err, &status):
		return httpError{status: http.StatusBadGateway, msg: "upstream answered " + http.StatusText(status.Code)}
	case errors.As(err, &verify):
		return httpError{status: http.StatusBadGateway, msg: "upstream sent content that does not match its hash; it was discarded"}
	case errors.As(err, &proto), errors.As(err, &rng):
		return httpError{status: http.StatusBadGateway, msg: "upstream sent an invalid response"}
	case errors.Is(err, cache.ErrUncacheable):
		return httpError{status: http.StatusBadGateway, msg: "upstream gave this file no content hash (ETag); it can only be downloaded whole"}
	case errors.As(err, &fileE) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, fetch.ErrUnavailable):
		// A file upstream that breaks the safetensors rules: name the file
		// and the rule (the header package's messages are safe to show).
		return httpError{status: http.StatusBadGateway, code: "InvalidSafetensors", msg: fileE.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return httpError{status: http.StatusGatewayTimeout, msg: "upstream timed out"}
	case errors.Is(err, fetch.ErrUnavailable), errors.Is(err, fetch.ErrStalled):
		return httpError{status: http.StatusBadGateway, msg: "upstream unavailable"}
	}
	return httpError{status: http.StatusInternalServerError, msg: "internal error"}
}

// writeError answers r with err. Errors after the body started cannot be
// reported; the handlers abort those connections instead.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client is gone
	}
	he := toHTTPError(err)
	if he.status >= 500 {
		s.log.Warn("request failed", "id", w.Header().Get("X-Request-Id"), "path", r.URL.EscapedPath(), "status", he.status, "err", err)
	}
	if he.msg == "" {
		he.msg = http.StatusText(he.status)
	}
	h := w.Header()
	for _, k := range []string{"Content-Length", "Content-Range", "Content-Disposition", "ETag", "X-Linked-Etag", "X-Linked-Size", "Accept-Ranges"} {
		h.Del(k)
	}
	if he.code != "" {
		h.Set("X-Error-Code", he.code)
	}
	h.Set("X-Error-Message", oneLine(he.msg))
	if he.commit != "" {
		h.Set("X-Repo-Commit", he.commit)
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
