package server

import (
	"strconv"
	"strings"
	"testing"
)

func TestCoalesceRanges(t *testing.T) {
	for _, c := range []struct {
		spec string
		size int64
		want string // "" : left to http.ServeContent
	}{
		{"0-0,2-2", 10, "bytes=0-0,2-2"},
		{"2-2,0-0", 10, "bytes=2-2,0-0"},             // order kept
		{"0-4,5-9", 10, "bytes=0-9"},                 // adjacent
		{"5-9,0-6,20-30", 10, "bytes=0-9"},           // overlap; the past-the-end one dropped
		{"-3,0-0", 10, "bytes=7-9,0-0"},              // suffix
		{"-30,4-", 10, "bytes=0-9"},                  // suffix longer than the file
		{" 1 - 2 , ,4-5", 10, "bytes=1-2,4-5"},       // spaces and empty elements, as ServeContent
		{"10-12,20-", 10, ""},                        // nothing satisfiable: 416 from ServeContent
		{"a-b,0-1", 10, ""},                          // malformed
		{"3-1,5-6", 10, ""},                          // last before first
		{"-0,1-1", 10, "bytes=1-1"},                  // an empty suffix is unsatisfiable
		{"0-1,1-2,2-3,9-9,8-8", 10, "bytes=0-3,8-9"}, // chains
	} {
		parts, ok := coalesceRanges(c.spec, c.size)
		got := ""
		if ok {
			got = formatRanges(parts)
		}
		if got != c.want {
			t.Errorf("coalesceRanges(%q, %d) = %q, want %q", c.spec, c.size, got, c.want)
		}
	}
}

// Whatever the header, coalesced parts are inside the file, neither overlap
// nor touch, and cover exactly the bytes the satisfiable ranges asked for.
func FuzzCoalesceRanges(f *testing.F) {
	for _, s := range []string{"0-0,2-2", "5-9,0-6,20-30", "-3,0-0", "1-2,,4-5", "-0,1-1", "0-1,1-2,2-3,9-9,8-8"} {
		f.Add(s, int64(10))
	}
	f.Fuzz(func(t *testing.T, spec string, size int64) {
		if size <= 0 || size > 1<<12 || len(spec) > 256 {
			return
		}
		parts, ok := coalesceRanges(spec, size)
		if !ok {
			return
		}
		covered := make([]bool, size)
		for i, p := range parts {
			if p.start < 0 || p.end > size || p.start >= p.end {
				t.Fatalf("part %d [%d, %d) outside a %d-byte file", i, p.start, p.end, size)
			}
			for j := range parts[:i] {
				if q := parts[j]; p.start <= q.end && q.start <= p.end {
					t.Fatalf("parts [%d, %d) and [%d, %d) overlap or touch", q.start, q.end, p.start, p.end)
				}
			}
			for b := p.start; b < p.end; b++ {
				covered[b] = true
			}
		}
		// Every byte asked is covered, and nothing else.
		asked := make([]bool, size)
		for one := range strings.SplitSeq(spec, ",") {
			a, b, _ := strings.Cut(strings.TrimSpace(one), "-")
			a, b = strings.TrimSpace(a), strings.TrimSpace(b)
			var start, end int64
			if a == "" {
				n, _ := strconv.ParseInt(b, 10, 64)
				start, end = max(size-n, 0), size
			} else {
				start, _ = strconv.ParseInt(a, 10, 64)
				end = size
				if b != "" {
					last, _ := strconv.ParseInt(b, 10, 64)
					end = min(last+1, size)
				}
			}
			for x := start; x < end && x < size; x++ {
				asked[x] = true
			}
		}
		for x := range size {
			if asked[x] != covered[x] {
				t.Fatalf("%q: byte %d asked %v, served %v (parts %+v)", spec, x, asked[x], covered[x], parts)
			}
		}
	})
}

func TestSingleRange(t *testing.T) {
	tests := []struct {
		h          string
		size       int64
		start, end int64
		ok         bool
	}{
		{"bytes=0-0", 10, 0, 1, true},
		{"bytes=2-5", 10, 2, 6, true},
		{"bytes=5-", 10, 5, 10, true},
		{"bytes=-3", 10, 7, 10, true},
		{"bytes=-30", 10, 0, 10, true},
		{"bytes=8-100", 10, 8, 10, true},
		{"bytes=10-", 10, 0, 0, false},
		{"bytes=0-1,3-4", 10, 0, 0, false},
		{"bytes=5-2", 10, 0, 0, false},
		{"items=0-1", 10, 0, 0, false},
		{"bytes=x-1", 10, 0, 0, false},
		{"", 10, 0, 0, false},
	}
	for _, tt := range tests {
		s, e, ok := singleRange(tt.h, tt.size)
		if ok != tt.ok || (ok && (s != tt.start || e != tt.end)) {
			t.Errorf("singleRange(%q, %d) = %d, %d, %v; want %d, %d, %v", tt.h, tt.size, s, e, ok, tt.start, tt.end, tt.ok)
		}
	}
}
