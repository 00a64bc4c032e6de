package hubtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// span is an inclusive byte range of a file.
type span struct{ start, end int64 }

// parseRanges parses a Range value of one or more ranges against size. A
// single range is parseRange's. Several are answered as CloudFront answers
// them: only an ascending, non-overlapping set (errBadRange otherwise, so
// the whole file is served, as RFC 9110 §14.2 allows), unsatisfiable ranges
// dropped, and errUnsatisfiable when none is left. With singleOnly, several
// ranges are errBadRange: a server that ignores multi-range requests.
func parseRanges(spec string, size int64, singleOnly bool) ([]span, error) {
	v, ok := strings.CutPrefix(spec, "bytes=")
	if !ok || !strings.Contains(v, ",") {
		s, e, err := parseRange(spec, size)
		return []span{{s, e}}, err
	}
	if singleOnly {
		return nil, errBadRange
	}
	var out []span
	prevEnd := int64(-1) // the end of the previous range asked, satisfiable or not
	for _, one := range strings.Split(v, ",") {
		one = strings.TrimSpace(one)
		if strings.HasPrefix(one, "-") {
			return nil, errBadRange // a suffix range in a set: not ascending by construction
		}
		s, e, err := parseRange("bytes="+one, size)
		switch {
		case err == errUnsatisfiable:
			// Past the end: dropped. It starts after every byte of the
			// file, so any satisfiable range after it is out of order.
			prevEnd = size - 1
			continue
		case err != nil:
			return nil, errBadRange
		case s <= prevEnd:
			return nil, errBadRange // overlapping or out of order
		}
		out = append(out, span{s, e})
		prevEnd = e
	}
	if len(out) == 0 {
		return nil, errUnsatisfiable
	}
	return out, nil
}

// segment is a piece of a response body: file content, or the multipart
// framing around it, which the counters keep apart (it is not the file's).
type segment struct {
	b       []byte
	framing bool
}

// multipartBody frames the spans of data as multipart/byteranges (RFC 9110
// §14.6), each part typed ctype, and returns the body and its boundary.
func multipartBody(data []byte, spans []span, ctype string) ([]segment, string) {
	var rnd [12]byte
	_, _ = rand.Read(rnd[:]) // never fails since Go 1.24
	boundary := hex.EncodeToString(rnd[:])
	size := len(data)
	var segs []segment
	for i, s := range spans {
		lead := "\r\n"
		if i == 0 {
			lead = ""
		}
		head := fmt.Sprintf("%s--%s\r\nContent-Type: %s\r\nContent-Range: bytes %d-%d/%d\r\n\r\n", lead, boundary, ctype, s.start, s.end, size)
		segs = append(segs, segment{b: []byte(head), framing: true}, segment{b: data[s.start : s.end+1]})
	}
	segs = append(segs, segment{b: []byte("\r\n--" + boundary + "--\r\n"), framing: true})
	return segs, boundary
}

// bodyLen is the length of a body made of segs.
func bodyLen(segs []segment) int {
	n := 0
	for _, s := range segs {
		n += len(s.b)
	}
	return n
}

// cutSegments splits segs at byte at of the body they make.
func cutSegments(segs []segment, at int) (head, tail []segment) {
	for i, s := range segs {
		if at < len(s.b) {
			head = append(head, segs[:i]...)
			if at > 0 {
				head = append(head, segment{b: s.b[:at], framing: s.framing})
			}
			tail = append([]segment{{b: s.b[at:], framing: s.framing}}, segs[i+1:]...)
			return head, tail
		}
		at -= len(s.b)
	}
	return segs, nil
}
