package fetch

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// rangeBody is the body of a checked 206. It yields exactly n bytes and
// turns every way an upstream can get that wrong into a typed error: ending
// early (io.ErrUnexpectedEOF), sending more (ErrLongBody), or going quiet
// (ErrStalled, via the guard). It never hands out a byte past n.
//
// Like any io.Reader it is for one goroutine; Close may be called at any
// time, and more than once.
type rangeBody struct {
	body io.ReadCloser
	g    *guard // the attempt's stall guard; stopped by Close
	left int64  // bytes still owed
	n    int64  // bytes promised
	url  string // redacted, for errors
	err  error  // sticky: once set, every Read returns it

	closed atomic.Bool // set by Close, which may race with Read
}

var errClosedBody = errors.New("fetch: read on a closed range body")

func (b *rangeBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.closed.Load() {
		return 0, errClosedBody
	}
	if b.left == 0 {
		b.err = b.checkEnd()
		return 0, b.err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	b.g.arm()
	k, err := b.body.Read(p)
	b.g.disarm()
	b.left -= int64(k)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF) && b.left == 0:
		b.err = io.EOF
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		b.err = b.short()
	default:
		b.err = b.failed(err)
	}
	return k, b.err
}

// checkEnd runs once all n bytes are out: the body must end there. A body
// with a Content-Length of n ends by itself; a chunked one could run on.
func (b *rangeBody) checkEnd() error {
	var one [1]byte
	for {
		b.g.arm()
		k, err := b.body.Read(one[:])
		b.g.disarm()
		switch {
		case k > 0:
			return fmt.Errorf("fetch: GET %s: more than %d bytes: %w", b.url, b.n, ErrLongBody)
		case errors.Is(err, io.EOF):
			return io.EOF
		case err != nil:
			return b.failed(err)
		}
	}
}

func (b *rangeBody) short() error {
	return fmt.Errorf("fetch: GET %s: body ended after %d of %d bytes: %w", b.url, b.n-b.left, b.n, io.ErrUnexpectedEOF)
}

// failed classifies a read error: a stall, a cancellation by the caller, or
// a network failure (which matches ErrUnavailable).
func (b *rangeBody) failed(err error) error {
	if b.closed.Load() {
		return errClosedBody
	}
	if b.g.stalled() {
		return &netError{method: "GET", url: b.url, err: fmt.Errorf("no progress after %d of %d bytes: %w", b.n-b.left, b.n, ErrStalled)}
	}
	return transportErr(b.g.ctx(), "GET", b.url, err)
}

// Close releases the connection and the attempt's guard.
func (b *rangeBody) Close() error {
	b.closed.Store(true)
	err := b.body.Close()
	b.g.stop()
	return err
}
