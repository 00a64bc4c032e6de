package repoapi

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
		if got := RewriteLinks(tt.in, up, pub); got != tt.want {
			t.Errorf("RewriteLinks(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
