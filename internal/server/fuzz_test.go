package server

import (
	"strings"
	"testing"
)

// FuzzSingleRange checks the Range parser's answers are always inside the
// file and agree with the simplest reading of the header.
func FuzzSingleRange(f *testing.F) {
	for _, s := range []string{"bytes=0-0", "bytes=5-", "bytes=-3", "bytes=1-2,4-5", "bytes=9-3", "bytes= 1-2", "bytes=-0"} {
		f.Add(s, int64(10))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		start, end, ok := singleRange(h, size)
		if !ok {
			return
		}
		if size <= 0 || start < 0 || start >= end || end > size {
			t.Fatalf("singleRange(%q, %d) = [%d, %d): outside the file", h, size, start, end)
		}
		if strings.Contains(h, ",") || !strings.HasPrefix(h, "bytes=") {
			t.Fatalf("singleRange(%q) accepted a multi-range or non-bytes unit", h)
		}
	})
}
