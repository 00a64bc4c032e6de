package server

import (
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
