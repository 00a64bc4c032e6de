package hubtest

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// content is one file body about to be served.
type content struct {
	data  []byte
	key   string // "{repo}/{path}" for BytesByPath and CorruptPath
	class class
}

// writeChunk bounds each Write so BodyBytes grows while a large body is sent.
const writeChunk = 64 << 10

// serveBytes answers GET or HEAD for c.data with range support, as the CDN
// and the Hub do (docs/hub-protocol.md §6): 206 with Content-Range for a
// satisfiable range (the end clamped to the last byte), 416 with
// "bytes */size" when the start is at or past the end, and 200 for no range
// or a malformed one (RFC 9110 §14.2 lets a server ignore Range). Several
// ranges, ascending and apart, get a 206 multipart/byteranges as CloudFront
// sends it (each part typed as the file, with its Content-Range), unless
// Options.SingleRanges makes the hub ignore them (200, the whole file). The
// caller has set the route's own headers. Armed body faults apply here; on a
// multipart answer WrongContentRange shifts the first part, CorruptBytes
// every part, and the cutting faults cut the answer as a whole.
func (h *Hub) serveBytes(w http.ResponseWriter, r *http.Request, c content) {
	size := int64(len(c.data))
	hd := w.Header()
	hd.Set("Accept-Ranges", "bytes")
	get := r.Method == http.MethodGet
	status := http.StatusOK
	body := []segment{{b: c.data}}
	if spec := r.Header.Get("Range"); spec != "" {
		spans, err := parseRanges(spec, size, h.oneRange)
		switch {
		case errors.Is(err, errUnsatisfiable):
			hd.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			hd.Set("Content-Length", "0")
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		case err != nil:
			// ignored: serve the whole file
		case get && h.faults.take(faultIgnoreRange, c.class, c.key):
			// the fault: serve the whole file
		default:
			status = http.StatusPartialContent
			if get && h.faults.take(faultWrongContentRange, c.class, c.key) {
				spans[0].start, spans[0].end = shiftRange(spans[0].start, spans[0].end, size)
			}
			if len(spans) == 1 {
				hd.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", spans[0].start, spans[0].end, size))
				body = []segment{{b: c.data[spans[0].start : spans[0].end+1]}}
				break
			}
			ctype := hd.Get("Content-Type")
			if ctype == "" {
				ctype = "application/octet-stream"
			}
			var boundary string
			body, boundary = multipartBody(c.data, spans, ctype)
			hd.Set("Content-Type", "multipart/byteranges; boundary="+boundary)
		}
	}
	n := bodyLen(body)
	hd.Set("Content-Length", strconv.Itoa(n))
	if !get || n == 0 {
		w.WriteHeader(status)
		return
	}

	if h.faults.take(faultCorruptBytes, c.class, c.key) {
		for i, s := range body {
			if !s.framing {
				body[i].b = corrupt(s.b)
			}
		}
	}
	cut := faultNone
	for _, k := range []faultKind{faultResetMidBody, faultTruncate, faultStallBody} {
		if h.faults.take(k, c.class, c.key) {
			cut = k
			break
		}
	}
	w.WriteHeader(status)
	if cut == faultNone {
		h.writeCounted(w, body, c)
		return
	}

	head, tail := cutSegments(body, h.faults.cutAt(n))
	if h.writeCounted(w, head, c) != nil {
		return
	}
	rc := http.NewResponseController(w)
	switch cut {
	case faultTruncate:
		// Returning with fewer bytes than Content-Length makes net/http
		// close the connection instead of reusing it.
	case faultResetMidBody:
		if rc.Flush() != nil {
			return
		}
		conn, _, err := rc.Hijack()
		if err != nil {
			panic(http.ErrAbortHandler) // still ends the connection abruptly
		}
		if sc, ok := conn.(*shapedConn); ok {
			_ = sc.reset()
		} else {
			_ = conn.Close()
		}
	case faultStallBody:
		if rc.Flush() != nil {
			return
		}
		d := h.faults.stallFor()
		if d <= 0 {
			select {
			case <-r.Context().Done():
			case <-h.done:
			}
			return
		}
		if h.pause(r.Context(), d) {
			h.writeCounted(w, tail, c)
		}
	}
}

// writeCounted writes segs in chunks, counting what the connection
// accepted: file content in BodyBytes and BytesByPath, multipart framing in
// FramingBytes. Each chunk is counted before it is written and the part the
// connection refused taken back after, so a client that has read a byte
// never sees a counter without it (a test that reads a body to the end and
// then resets the counters must not see the tail counted afterwards).
func (h *Hub) writeCounted(w http.ResponseWriter, segs []segment, c content) error {
	count := func(framing bool, n int64) {
		if c.class == classForeign {
			return
		}
		if framing {
			h.stats.framing.Add(n)
			return
		}
		h.stats.bodyBytes.Add(n)
		h.stats.addBytes(c.key, n)
	}
	for _, s := range segs {
		for p := s.b; len(p) > 0; {
			k := min(len(p), writeChunk)
			count(s.framing, int64(k))
			n, err := w.Write(p[:k])
			if n < k {
				count(s.framing, int64(n-k))
			}
			if err != nil {
				return err
			}
			p = p[n:]
		}
	}
	return nil
}

// corrupt returns a copy of p with the first byte and every 4096th after it
// inverted, so any block a client verifies is wrong.
func corrupt(p []byte) []byte {
	out := make([]byte, len(p))
	copy(out, p)
	for i := 0; i < len(out); i += 4096 {
		out[i] ^= 0xFF
	}
	return out
}

// shiftRange is the lie WrongContentRange tells: a same-length range one
// byte later, else one earlier; a whole-file range loses its first byte.
func shiftRange(start, end, size int64) (int64, int64) {
	switch {
	case end+1 < size:
		return start + 1, end + 1
	case start > 0:
		return start - 1, end - 1
	case size > 1:
		return 1, end
	}
	return start, end // a one-byte file leaves nothing to lie about
}

var (
	errUnsatisfiable = errors.New("range not satisfiable")
	errBadRange      = errors.New("malformed or multiple ranges")
)

// parseRange parses a single "bytes=a-b", "bytes=a-" or "bytes=-n" range
// against size and returns inclusive bounds, with the end clamped to size-1.
func parseRange(spec string, size int64) (start, end int64, err error) {
	v, ok := strings.CutPrefix(spec, "bytes=")
	if !ok || strings.Contains(v, ",") {
		return 0, 0, errBadRange
	}
	a, b, ok := strings.Cut(strings.TrimSpace(v), "-")
	if !ok {
		return 0, 0, errBadRange
	}
	if a == "" { // suffix: the last n bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, errBadRange
		}
		if n == 0 || size == 0 {
			return 0, 0, errUnsatisfiable
		}
		return max(size-n, 0), size - 1, nil
	}
	start, err = strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 {
		return 0, 0, errBadRange
	}
	end = size - 1
	if b != "" {
		end, err = strconv.ParseInt(b, 10, 64)
		if err != nil || end < start {
			return 0, 0, errBadRange
		}
		end = min(end, size-1)
	}
	if start >= size {
		return 0, 0, errUnsatisfiable
	}
	return start, end, nil
}
