package server

import (
	"testing"
)

func TestRewriteLinks(t *testing.T) {
	const up, pub = "https://huggingface.co", "http://proxy:8080"
	tests := []struct{ in, want string }{
		{`<https://huggingface.co/api/models/a/b/tree/main?cursor=xyz>; rel="next"`, `<http://proxy:8080/api/models/a/b/tree/main?cursor=xyz>; rel="next"`},
		{`<https://huggingface.co/api/models?cursor=a,b>;rel=next`, `<http://proxy:8080/api/models?cursor=a,b>; rel="next"`},
		{`</api/x?cursor=1>; rel="next"`, `<http://proxy:8080/api/x?cursor=1>; rel="next"`},
		{`<https://huggingface.co/api/x/xet-read-token/main>; rel="xet-auth", <https://huggingface.co/api/y>; rel="next"`, `<http://proxy:8080/api/y>; rel="next"`},
		{`<https://elsewhere.example/x>; rel="next"`, `<https://elsewhere.example/x>; rel="next"`},
	}
	for _, tt := range tests {
		if got := rewriteLinks(tt.in, up, pub); got != tt.want {
			t.Errorf("rewriteLinks(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
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
