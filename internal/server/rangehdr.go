package server

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// rangeReq is a request's Range header as the file routes need it, parsed
// once: the whole file, one satisfiable range, or something else (several
// ranges, or one past the end) that http.ServeContent answers itself.
type rangeReq struct {
	whole      bool  // no Range header: the whole file
	single     bool  // one satisfiable range
	start, end int64 // [start, end) of the bytes the answer carries, when whole or single
}

// parseRange reads a Range header (RFC 9110 §14.1.2) for a file of size
// bytes.
func parseRange(h string, size int64) rangeReq {
	if h == "" {
		return rangeReq{whole: true, end: size}
	}
	if start, end, ok := singleRange(h, size); ok {
		return rangeReq{single: true, start: start, end: end}
	}
	return rangeReq{}
}

// singleRange parses a single-range "bytes=" header into the half-open
// [start, end). ok is false for no header, multiple ranges, or an
// unsatisfiable range.
func singleRange(h string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") || size <= 0 {
		return 0, 0, false
	}
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false
	}
	if a == "" { // suffix: the last b bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size, true
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 || first >= size {
		return 0, 0, false
	}
	if b == "" {
		return first, size, true
	}
	last, err := strconv.ParseInt(b, 10, 64)
	if err != nil || last < first {
		return 0, 0, false
	}
	return first, min(last+1, size), true
}

// maxRanges is the most ranges one request may ask for, as nginx's
// max_ranges: no hub client sends several ranges (docs/hub-protocol.md §6),
// and each part of a cold file costs at least one cache block upstream,
// so 1,024 one-byte ranges 64 KiB apart once pulled 64 MiB for a 100 KiB
// answer. Sixteen serves what browsers and PDF readers ask for.
const maxRanges = 16

// rangeLimitError is a request for more than maxRanges ranges of content
// that is not held whole: 416, as RFC 9110 §15.5.17 allows for "an
// excessive number of small or overlapping ranges".
type rangeLimitError struct {
	asked int   // range specs in the header
	size  int64 // the content's length, for Content-Range: bytes */size
}

func (e *rangeLimitError) Error() string {
	return fmt.Sprintf("the request asks for %d ranges; hubproxy serves at most %d in one request while it does not hold the whole file (ask for fewer, or for one range)",
		e.asked, maxRanges)
}

// limitRanges applies hubproxy's rules for several ranges to r, before
// http.ServeContent answers it, so that what a request fetches upstream is
// bounded by the bytes it asks for plus two cache blocks per part:
//
//   - more than maxRanges specs: for complete content the Range header is
//     dropped and the whole answered 200 (nginx past max_ranges; it costs
//     nothing upstream); otherwise 416 with a message, since answering
//     whole would fetch the whole file;
//   - up to maxRanges: overlapping and adjacent ranges are coalesced
//     (RFC 9110 §14.2), so no byte is served or fetched twice and the sum
//     of the parts never exceeds the content (http.ServeContent answers
//     such a set whole). Parts keep the order of their first range.
//
// It reports false when it has answered r itself. A single range, or a
// header it cannot parse, is left as it is.
func (s *Server) limitRanges(w http.ResponseWriter, r *http.Request, c content) bool {
	size := c.Size()
	if size == 0 && r.Header.Get("Range") != "" {
		// Empty content has no satisfiable range; answer the whole (empty)
		// body rather than 416 so probes like bytes=0-0 succeed, with the
		// total where the JS client's fileDownloadInfo reads it.
		r.Header.Del("Range")
		w.Header().Set("Content-Range", "bytes */0")
	}
	spec, ok := strings.CutPrefix(r.Header.Get("Range"), "bytes=")
	if !ok || !strings.Contains(spec, ",") {
		return true
	}
	if n := strings.Count(spec, ",") + 1; n > maxRanges {
		if c.Complete() {
			r.Header.Del("Range")
			return true
		}
		s.writeError(w, r, &rangeLimitError{asked: n, size: size})
		return false
	}
	if parts, ok := coalesceRanges(spec, size); ok {
		r.Header.Set("Range", formatRanges(parts))
	}
	return true
}

// byteRange is [start, end) of the content; first is the index of the
// first range spec it came from.
type byteRange struct {
	start, end int64
	first      int
}

// coalesceRanges parses the specs of a multi-range header as
// http.ServeContent does, drops the unsatisfiable ones, and merges those
// that overlap or touch. ok is false for a malformed spec or when no range
// is satisfiable: those are left to http.ServeContent's 416.
func coalesceRanges(spec string, size int64) ([]byteRange, bool) {
	var rs []byteRange
	for i, one := range strings.Split(spec, ",") {
		one = strings.TrimSpace(one)
		if one == "" {
			continue // as http.ServeContent: an empty element is skipped
		}
		a, b, found := strings.Cut(one, "-")
		if !found {
			return nil, false
		}
		a, b = strings.TrimSpace(a), strings.TrimSpace(b)
		var start, end int64
		if a == "" {
			n, err := strconv.ParseInt(b, 10, 64)
			if err != nil || n < 0 {
				return nil, false
			}
			start, end = max(size-n, 0), size
		} else {
			first, err := strconv.ParseInt(a, 10, 64)
			if err != nil || first < 0 {
				return nil, false
			}
			start, end = first, size
			if b != "" {
				last, err := strconv.ParseInt(b, 10, 64)
				if err != nil || last < first {
					return nil, false
				}
				end = min(last+1, size)
			}
		}
		if start >= size || end <= start {
			continue // unsatisfiable: dropped, as the RFC and ServeContent do
		}
		rs = append(rs, byteRange{start: start, end: end, first: i})
	}
	if len(rs) == 0 {
		return nil, false
	}
	slices.SortFunc(rs, func(x, y byteRange) int { return cmp.Compare(x.start, y.start) })
	out := rs[:1]
	for _, x := range rs[1:] {
		if last := &out[len(out)-1]; x.start <= last.end {
			last.end = max(last.end, x.end)
			last.first = min(last.first, x.first)
			continue
		}
		out = append(out, x)
	}
	slices.SortFunc(out, func(x, y byteRange) int { return cmp.Compare(x.first, y.first) })
	return out, true
}

// formatRanges writes parts back as a Range header value.
func formatRanges(parts []byteRange) string {
	b := []byte("bytes=")
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, p.start, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, p.end-1, 10)
	}
	return string(b)
}
