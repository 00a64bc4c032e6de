package server

import (
	"errors"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

func TestParseFileRoute(t *testing.T) {
	tests := []struct {
		in   string
		want fileRoute
	}{
		{"/gpt2/resolve/main/config.json", fileRoute{repo: hub.Repo{Type: hub.Model, ID: "gpt2"}, rev: "main", path: "config.json"}},
		{"/org/name/resolve/main/a/b.safetensors", fileRoute{repo: hub.Repo{Type: hub.Model, ID: "org/name"}, rev: "main", path: "a/b.safetensors"}},
		{"/datasets/org/ds/resolve/v1.0/data/x.parquet", fileRoute{repo: hub.Repo{Type: hub.Dataset, ID: "org/ds"}, rev: "v1.0", path: "data/x.parquet"}},
		{"/spaces/org/sp/raw/main/app.py", fileRoute{repo: hub.Repo{Type: hub.Space, ID: "org/sp"}, raw: true, rev: "main", path: "app.py"}},
		{"/org/name/resolve/refs%2Fpr%2F1/model.bin", fileRoute{repo: hub.Repo{Type: hub.Model, ID: "org/name"}, rev: "refs/pr/1", path: "model.bin"}},
		{"/org/name/resolve/refs/pr/12/sub/model.bin", fileRoute{repo: hub.Repo{Type: hub.Model, ID: "org/name"}, rev: "refs/pr/12", path: "sub/model.bin"}},
		{"/org/name/resolve/refs/convert/parquet/x.parquet", fileRoute{repo: hub.Repo{Type: hub.Model, ID: "org/name"}, rev: "refs/convert/parquet", path: "x.parquet"}},
		{"/org/name/resolve/main/dir%20x/f%C3%A9.txt", fileRoute{repo: hub.Repo{Type: hub.Model, ID: "org/name"}, rev: "main", path: "dir x/fé.txt"}},
		// A file literally named "resolve" further down does not confuse the split.
		{"/org/name/resolve/main/resolve/x", fileRoute{repo: hub.Repo{Type: hub.Model, ID: "org/name"}, rev: "main", path: "resolve/x"}},
	}
	for _, tt := range tests {
		got, err := parseFileRoute(tt.in)
		if err != nil {
			t.Errorf("parseFileRoute(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("parseFileRoute(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseFileRouteRejects(t *testing.T) {
	for _, in := range []string{
		"/org/name/resolve/main/../../etc/passwd",
		"/org/name/resolve/main/a/%2E%2E/b",
		"/org/name/resolve/main/%2Fetc%2Fpasswd",
		"/org/name/resolve/main/a%00b",
		"/org/name/resolve/main/",
		"/org/name/resolve/..%2F..%2Fx/file",
		"/org/na%ZZme/resolve/main/file",
		"/a/b/c/resolve/main/file",
		"/../x/resolve/main/file",
		"/org/name/resolve/main/a%5Cb",
	} {
		_, err := parseFileRoute(in)
		var inv *hub.InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("parseFileRoute(%q) = %v, want *hub.InvalidError", in, err)
		}
	}
	if _, err := parseFileRoute("/org/name/blob/main/x"); !errors.Is(err, errNoRoute) {
		t.Errorf("non-file URL: %v, want errNoRoute", err)
	}
}

func TestParseAPIRoute(t *testing.T) {
	model := func(id string) hub.Repo { return hub.Repo{Type: hub.Model, ID: id} }
	tests := []struct {
		in   string
		want apiRoute
	}{
		{"/api/models/gpt2", apiRoute{kind: apiInfo, repo: model("gpt2")}},
		{"/api/models/org/name", apiRoute{kind: apiInfo, repo: model("org/name")}},
		{"/api/models/org/name/revision/main", apiRoute{kind: apiInfo, repo: model("org/name"), rev: "main"}},
		{"/api/models/org/name/revision/refs%2Fpr%2F3", apiRoute{kind: apiInfo, repo: model("org/name"), rev: "refs/pr/3"}},
		{"/api/models/org/name/revision/refs/pr/3", apiRoute{kind: apiInfo, repo: model("org/name"), rev: "refs/pr/3"}},
		{"/api/datasets/org/ds/tree/main", apiRoute{kind: apiTree, repo: hub.Repo{Type: hub.Dataset, ID: "org/ds"}, rev: "main"}},
		{"/api/models/org/name/tree/main/sub%2Fdir", apiRoute{kind: apiTree, repo: model("org/name"), rev: "main", path: "sub/dir"}},
		{"/api/models/org/name/tree/refs/pr/1/sub", apiRoute{kind: apiTree, repo: model("org/name"), rev: "refs/pr/1", path: "sub"}},
		{"/api/models/org/name/paths-info/main", apiRoute{kind: apiPathsInfo, repo: model("org/name"), rev: "main"}},
		{"/api/models/org/name/xet-read-token/main", apiRoute{kind: apiXetToken, repo: model("org/name"), rev: "main"}},
		{"/api/models/org/name/refs", apiRoute{kind: apiPass}},
		{"/api/whoami-v2", apiRoute{kind: apiPass}},
		{"/api/models", apiRoute{kind: apiPass}},
	}
	for _, tt := range tests {
		got, err := parseAPIRoute(tt.in)
		if err != nil {
			t.Errorf("parseAPIRoute(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("parseAPIRoute(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
	if _, err := parseAPIRoute("/api/models/org/name/tree/main/..%2F..%2Fx"); err == nil {
		t.Error("traversal in tree path accepted")
	}
}

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
