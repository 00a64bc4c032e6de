package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
)

// Range is Len bytes at Off of a file.
type Range struct{ Off, Len int64 }

// MaxRanges bounds the ranges of one GetRanges request, so its Range header
// stays small (about 20 bytes a range: some 1.3 KB at 64), well inside what
// servers and CDNs accept for a request's headers.
const MaxRanges = 64

// ErrNotMultipart means the upstream answered a multi-range GET with
// something other than multipart/byteranges: a 200 (the whole file; RFC 9110
// lets a server ignore Range) or a single 206. The answer was closed unread;
// fetch the ranges one at a time instead.
var ErrNotMultipart = errors.New("upstream does not serve multipart byte ranges")

// GetRanges GETs several byte ranges of rawURL, a DownloadURL from Resolve,
// in one request: "Range: bytes=a-b,c-d,…". ranges must number 2 to
// MaxRanges, each at least one byte, in ascending order with a gap between
// neighbours (adjacent or overlapping ranges are one range; asking for them
// apart invites a server to merge them), and end inside want.Size when it is
// set. Credentials, redirects, retries and identity checks are GetRange's.
//
// The answer must be a 206 multipart/byteranges whose parts are exactly the
// asked ranges, in order, each part's Content-Range naming its range of the
// resolved size, none missing, none extra, each exactly as long as its range
// and none transfer-encoded. The body yields the ranges' bytes back to back
// (the sum of their lengths) and then io.EOF. It never hands out the last
// byte of a part before that part has been seen to end where it should, nor
// the last byte of all before the answer's closing boundary: a long part or
// an extra part fails the read that would complete it, with no byte of it.
// Every other departure is an error too (a *RangeError for a part that names
// another range, a *ProtocolError for broken framing, io.ErrUnexpectedEOF
// for an answer cut short, ErrStalled for one that goes quiet); a caller
// must drop what it read from a body that fails.
//
// An answer that is not multipart (a 200, or one single 206) is closed
// without reading it, and the error matches ErrNotMultipart.
func (c *Client) GetRanges(ctx context.Context, rawURL, auth string, want Want, ranges []Range) (io.ReadCloser, error) {
	if err := checkRanges(ranges, want.Size); err != nil {
		return nil, err
	}
	resp, g, u, err := c.rangedGet(ctx, rawURL, auth, rangesHeader(ranges))
	if err != nil {
		return nil, err
	}
	if code := resp.StatusCode; code != http.StatusPartialContent {
		resp.Body.Close() // the whole file: never read it
		g.stop()
		return nil, fmt.Errorf("fetch: GET %s: status %d for %d ranges: %w", redact(u), code, len(ranges), ErrNotMultipart)
	}
	boundary, err := c.checkMultipart(resp, u, want)
	if err != nil {
		resp.Body.Close() // never read: a single range, or a broken answer
		g.stop()
		return nil, err
	}
	src := &watchedBody{body: resp.Body, g: g}
	return &partsBody{src: src, mr: multipart.NewReader(src, boundary), ranges: ranges, size: want.Size, url: redact(u)}, nil
}

// checkRanges refuses what GetRanges cannot ask for unambiguously.
func checkRanges(ranges []Range, size int64) error {
	if len(ranges) < 2 || len(ranges) > MaxRanges {
		return fmt.Errorf("fetch: %d ranges: GetRanges takes 2 to %d", len(ranges), MaxRanges)
	}
	end := int64(-1) // end of the previous range; the next must start past it
	for i, r := range ranges {
		if r.Off < 0 || r.Len < 1 || r.Off > maxInt64-r.Len {
			return fmt.Errorf("fetch: invalid range %d: offset %d, length %d", i, r.Off, r.Len)
		}
		if r.Off <= end {
			return fmt.Errorf("fetch: range %d at %d does not start after the previous one (ending at %d)", i, r.Off, end)
		}
		if size > 0 && r.Off+r.Len > size {
			return fmt.Errorf("fetch: range %d ends at %d, past the file's %d bytes", i, r.Off+r.Len, size)
		}
		end = r.Off + r.Len
	}
	return nil
}

// rangesHeader is the Range value asking for ranges.
func rangesHeader(ranges []Range) string {
	var b strings.Builder
	b.WriteString("bytes=")
	for i, r := range ranges {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(r.Off, 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatInt(r.Off+r.Len-1, 10))
	}
	return b.String()
}

// checkMultipart vets the headers of a 206 to a multi-range request and
// returns its boundary. A 206 that is not multipart is a single range
// (ErrNotMultipart); an encoded body or another file's answer is refused as
// GetRange refuses them. The size is checked part by part (a multipart
// answer has no Content-Range of its own).
func (c *Client) checkMultipart(resp *http.Response, u *url.URL, want Want) (string, error) {
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || !strings.EqualFold(mt, "multipart/byteranges") {
		return "", fmt.Errorf("fetch: GET %s: a 206 of Content-Type %q to a multi-range request: %w",
			redact(u), clean(resp.Header.Get("Content-Type"), 64, nil), ErrNotMultipart)
	}
	// RFC 2046 §5.1.1: 1 to 70 characters.
	boundary := params["boundary"]
	if boundary == "" || len(boundary) > 70 {
		return "", &ProtocolError{URL: redact(u), Reason: "multipart/byteranges without a valid boundary"}
	}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return "", &ProtocolError{URL: redact(u), Reason: "multipart answer with Content-Encoding " + strconv.Quote(clean(enc, 32, nil))}
	}
	if err := c.checkIdentity(resp, u, Want{ETag: want.ETag}); err != nil {
		return "", err
	}
	return boundary, nil
}

// watchedBody is a response body read under the attempt's stall guard. It
// remembers how the body ended, so an error the multipart parser reports
// can be told apart: the network failed, the answer was cut short, or its
// framing is broken.
type watchedBody struct {
	body    io.ReadCloser
	g       *guard
	ended   bool  // the body ended (io.EOF or a short read)
	failure error // the first other error reading it
}

func (w *watchedBody) Read(p []byte) (int, error) {
	w.g.arm()
	k, err := w.body.Read(p)
	w.g.disarm()
	switch {
	case err == nil:
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		w.ended = true
	case w.failure == nil:
		w.failure = err
	}
	return k, err
}

// partsBody yields the asked ranges' bytes from a multipart/byteranges
// answer, checking each part against the range it must be. Like any
// io.Reader it is for one goroutine; Close may be called at any time.
type partsBody struct {
	src    *watchedBody
	mr     *multipart.Reader
	part   *multipart.Part // the part being read; nil between parts
	ranges []Range
	next   int   // the range the current (or next) part must be
	left   int64 // bytes of the current part still owed
	size   int64 // every part's total must be this; 0: they must agree
	url    string
	err    error // sticky: once set, every Read returns it

	closed atomic.Bool // set by Close, which may race with Read
}

func (b *partsBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.closed.Load() {
		return 0, errClosedBody
	}
	if len(p) == 0 {
		return 0, nil
	}
	if b.part == nil {
		if err := b.open(); err != nil {
			b.err = err
			return 0, err
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	k, err := b.part.Read(p)
	b.left -= int64(k)
	switch {
	case b.left == 0:
		// The part's last bytes: hand them out only once it is seen to
		// end here (and, for the last part, the answer with it).
		if err := b.end(); err != nil {
			b.err = err
			return 0, err
		}
		if b.next == len(b.ranges) {
			b.err = io.EOF
			return k, io.EOF
		}
		return k, nil
	case err == nil:
		return k, nil
	case errors.Is(err, io.EOF):
		b.err = fmt.Errorf("fetch: GET %s: part %d of %d ended %d bytes short: %w", b.url, b.next+1, len(b.ranges), b.left, io.ErrUnexpectedEOF)
	default:
		b.err = b.failed(err, fmt.Sprintf("inside part %d of %d", b.next+1, len(b.ranges)))
	}
	return 0, b.err
}

// open reads the next part's headers and checks them against the range it
// must carry.
func (b *partsBody) open() error {
	r := b.ranges[b.next]
	part, err := b.mr.NextRawPart()
	if errors.Is(err, io.EOF) {
		return &ProtocolError{URL: b.url, Reason: fmt.Sprintf("multipart answer has %d parts, %d ranges were asked", b.next, len(b.ranges))}
	}
	if err != nil {
		return b.failed(err, fmt.Sprintf("before part %d of %d", b.next+1, len(b.ranges)))
	}
	cr := part.Header.Get("Content-Range")
	a, z, total, ok := parseContentRange(cr)
	if !ok || a != r.Off || z != r.Off+r.Len-1 {
		got := "no Content-Range"
		if cr != "" {
			got = strconv.Quote(clean(cr, 96, nil))
		}
		return &RangeError{URL: b.url, Status: http.StatusPartialContent, Want: wantRange(r.Off, r.Off+r.Len-1),
			Got: fmt.Sprintf("part %d of %d: %s", b.next+1, len(b.ranges), got)}
	}
	if b.size == 0 {
		b.size = total // the first part sets the total the others must agree with
	}
	if total != b.size || total <= z {
		return &ProtocolError{URL: b.url, Reason: fmt.Sprintf("the answer describes another file: part %d has total size %d, want %d", b.next+1, total, b.size)}
	}
	if enc := part.Header.Get("Content-Transfer-Encoding"); enc != "" && !strings.EqualFold(enc, "binary") && !strings.EqualFold(enc, "8bit") {
		return &ProtocolError{URL: b.url, Reason: "part with Content-Transfer-Encoding " + strconv.Quote(clean(enc, 32, nil))}
	}
	b.part, b.left = part, r.Len
	return nil
}

// end checks that the current part ends with its range, and after the last
// part, that the answer ends too (its closing boundary, no further part).
func (b *partsBody) end() error {
	var one [1]byte
	k, err := b.part.Read(one[:])
	for k == 0 && err == nil {
		k, err = b.part.Read(one[:])
	}
	switch {
	case k > 0:
		return fmt.Errorf("fetch: GET %s: part %d of %d is longer than its %d bytes: %w", b.url, b.next+1, len(b.ranges), b.ranges[b.next].Len, ErrLongBody)
	case !errors.Is(err, io.EOF):
		return b.failed(err, fmt.Sprintf("at the end of part %d of %d", b.next+1, len(b.ranges)))
	}
	b.part = nil
	b.next++
	if b.next < len(b.ranges) {
		return nil
	}
	_, err = b.mr.NextRawPart()
	switch {
	case err == nil:
		return &ProtocolError{URL: b.url, Reason: fmt.Sprintf("multipart answer has more parts than the %d ranges asked", len(b.ranges))}
	case !errors.Is(err, io.EOF):
		return b.failed(err, "after the last part")
	}
	return nil
}

// failed classifies an error from the multipart reader at where: the
// stall guard fired, the caller left, the network failed (ErrUnavailable),
// the answer was cut short (io.ErrUnexpectedEOF), or the framing is broken.
func (b *partsBody) failed(err error, where string) error {
	switch {
	case b.closed.Load():
		return errClosedBody
	case b.src.g.stalled():
		return &netError{method: "GET", url: b.url, err: fmt.Errorf("no progress %s: %w", where, ErrStalled)}
	case b.src.failure != nil:
		return transportErr(b.src.g.ctx(), "GET", b.url, b.src.failure)
	case b.src.ended:
		return fmt.Errorf("fetch: GET %s: multipart answer ended %s: %w", b.url, where, io.ErrUnexpectedEOF)
	}
	return &ProtocolError{URL: b.url, Reason: "malformed multipart answer " + where + ": " + clean(err.Error(), 128, nil)}
}

// Close releases the connection and the attempt's guard.
func (b *partsBody) Close() error {
	b.closed.Store(true)
	err := b.src.body.Close()
	b.src.g.stop()
	return err
}
