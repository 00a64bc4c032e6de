// Package inproc serves HTTP requests by calling an http.Handler in the same
// process: an http.Client with Transport(h) talks to h with no socket. The
// dir: upstream (a directory served as a hub) and the CLI's in-process
// proxy use it.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
)

// Transport returns an http.RoundTripper that answers every request by
// calling h in process, whatever the URL's host: hubproxy talks to a dirhub
// (or a CLI to an in-process hubproxy) through an ordinary http.Client with
// no socket. Bodies stream through an io.Pipe, so a multi-GB file is never
// held in memory: the handler's writes block until the caller reads.
//
// The handler sees a server-side request (path-only URL, RequestURI set)
// whose context is the caller's. RoundTrip returns once the handler has
// written its header (or returned); a declared Content-Length is enforced as
// net/http does (a short body ends in io.ErrUnexpectedEOF). Closing the body,
// or the request context ending, makes the handler's further writes fail.
func Transport(h http.Handler) http.RoundTripper { return &transport{h: h} }

type transport struct{ h http.Handler }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	sreq := req.Clone(ctx)
	sreq.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	sreq.RequestURI = req.URL.RequestURI()
	sreq.Proto, sreq.ProtoMajor, sreq.ProtoMinor = "HTTP/1.1", 1, 1
	sreq.RemoteAddr = "127.0.0.1:0"
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}

	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, ready: make(chan struct{}), pw: pw, method: req.Method, cl: -1}
	go func() {
		defer func() {
			sreq.Body.Close() // as net/http's server does after a handler
			if p := recover(); p != nil {
				w.finish(fmt.Errorf("dirhub: handler panicked: %v", p))
				return
			}
			w.finish(nil)
		}()
		t.h.ServeHTTP(w, sreq)
	}()
	select {
	case <-w.ready:
		// A handler that gives up because the context ended still
		// "answers" (an empty 200 when it returns); the cancellation is
		// the truth, whichever of the two select saw first.
		if err := ctx.Err(); err != nil {
			pr.CloseWithError(err)
			return nil, err
		}
	case <-ctx.Done():
		pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}

	resp := &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		ContentLength: w.cl,
		Request:       req,
	}
	if !bodyAllowed(req.Method, w.status) {
		pr.Close()
		resp.Body = http.NoBody
		if req.Method != http.MethodHead {
			resp.ContentLength = 0
		}
		return resp, nil
	}
	stop := context.AfterFunc(ctx, func() { pr.CloseWithError(ctx.Err()) })
	resp.Body = &pipeBody{ctx: ctx, pr: pr, stop: stop}
	return resp, nil
}

// bodyAllowed mirrors net/http: HEAD, 1xx, 204 and 304 answers have none.
func bodyAllowed(method string, status int) bool {
	return method != http.MethodHead && status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// pipeWriter is the handler's http.ResponseWriter.
type pipeWriter struct {
	header http.Header
	method string
	pw     *io.PipeWriter

	mu      sync.Mutex
	status  int         // 0 until WriteHeader
	sent    http.Header // the header as of WriteHeader
	cl      int64       // declared Content-Length, -1 if none
	written int64
	ready   chan struct{} // closed by WriteHeader
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(code)
}

func (w *pipeWriter) writeHeaderLocked(code int) {
	if w.status != 0 || code < 200 {
		return // repeated, or informational (1xx): ignored
	}
	w.status = code
	w.sent = w.header.Clone()
	if v := w.sent.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			w.cl = n
		}
	}
	close(w.ready)
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writeHeaderLocked(http.StatusOK)
	if !bodyAllowed(w.method, w.status) {
		w.mu.Unlock()
		return 0, http.ErrBodyNotAllowed
	}
	short := false
	if w.cl >= 0 && w.written+int64(len(p)) > w.cl {
		p, short = p[:w.cl-w.written], true
	}
	w.written += int64(len(p))
	w.mu.Unlock()
	n, err := w.pw.Write(p)
	if err == nil && short {
		err = http.ErrContentLength
	}
	return n, err
}

// Flush is a no-op: writes reach the reader as they happen.
func (w *pipeWriter) Flush() {}

// finish ends the body when the handler returns: with err, or with
// io.ErrUnexpectedEOF if fewer bytes than declared were written.
func (w *pipeWriter) finish(err error) {
	w.mu.Lock()
	if err == nil {
		w.writeHeaderLocked(http.StatusOK)
	} else if w.status == 0 {
		w.writeHeaderLocked(http.StatusInternalServerError)
	}
	if err == nil && w.cl >= 0 && w.written < w.cl && bodyAllowed(w.method, w.status) {
		err = io.ErrUnexpectedEOF
	}
	w.mu.Unlock()
	w.pw.CloseWithError(err) // nil closes with io.EOF
}

// pipeBody is the response body; Close stops the handler's writes.
type pipeBody struct {
	ctx  context.Context
	pr   *io.PipeReader
	stop func() bool
	once sync.Once
}

func (b *pipeBody) Read(p []byte) (int, error) {
	n, err := b.pr.Read(p)
	if errors.Is(err, io.ErrClosedPipe) {
		if cerr := b.ctx.Err(); cerr != nil {
			return n, cerr // as net/http reports a cancelled body
		}
		err = fmt.Errorf("dirhub: read on closed body: %w", err)
	}
	return n, err
}

func (b *pipeBody) Close() error {
	b.once.Do(func() {
		b.stop()
		b.pr.Close()
	})
	return nil
}
