package hub

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestParseFileURL(t *testing.T) {
	tests := []struct {
		in   string
		want FileURL
	}{
		{"/gpt2/resolve/main/config.json", FileURL{FileRef: FileRef{Repo: MustRepo(Model, "gpt2"), Rev: "main", Path: "config.json"}}},
		{"/org/name/resolve/main/a/b.safetensors", FileURL{FileRef: FileRef{Repo: MustRepo(Model, "org/name"), Rev: "main", Path: "a/b.safetensors"}}},
		{"/datasets/org/ds/resolve/v1.0/data/x.parquet", FileURL{FileRef: FileRef{Repo: MustRepo(Dataset, "org/ds"), Rev: "v1.0", Path: "data/x.parquet"}}},
		{"/spaces/org/sp/raw/main/app.py", FileURL{FileRef: FileRef{Repo: MustRepo(Space, "org/sp"), Rev: "main", Path: "app.py"}, Raw: true}},
		{"/org/name/resolve/refs%2Fpr%2F1/model.bin", FileURL{FileRef: FileRef{Repo: MustRepo(Model, "org/name"), Rev: "refs/pr/1", Path: "model.bin"}}},
		{"/org/name/resolve/refs/pr/12/sub/model.bin", FileURL{FileRef: FileRef{Repo: MustRepo(Model, "org/name"), Rev: "refs/pr/12", Path: "sub/model.bin"}}},
		{"/org/name/resolve/refs/convert/parquet/x.parquet", FileURL{FileRef: FileRef{Repo: MustRepo(Model, "org/name"), Rev: "refs/convert/parquet", Path: "x.parquet"}}},
		{"/org/name/resolve/main/dir%20x/f%C3%A9.txt", FileURL{FileRef: FileRef{Repo: MustRepo(Model, "org/name"), Rev: "main", Path: "dir x/fé.txt"}}},
		// A file literally named "resolve" further down does not confuse the split.
		{"/org/name/resolve/main/resolve/x", FileURL{FileRef: FileRef{Repo: MustRepo(Model, "org/name"), Rev: "main", Path: "resolve/x"}}},
	}
	for _, tt := range tests {
		got, err := ParseFileURL(tt.in)
		if err != nil {
			t.Errorf("ParseFileURL(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseFileURL(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseFileURLRejects(t *testing.T) {
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
		_, err := ParseFileURL(in)
		var inv *InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("ParseFileURL(%q) = %v, want *InvalidError", in, err)
		}
	}
	if _, err := ParseFileURL("/org/name/blob/main/x"); !errors.Is(err, ErrNoRoute) {
		t.Errorf("non-file URL: %v, want ErrNoRoute", err)
	}
}

func TestParseAPIURL(t *testing.T) {
	model := func(id string) Repo { return MustRepo(Model, id) }
	tests := []struct {
		in   string
		want APIURL
	}{
		{"/api/models/gpt2", APIURL{Kind: APIInfo, Repo: model("gpt2")}},
		{"/api/models/org/name", APIURL{Kind: APIInfo, Repo: model("org/name")}},
		{"/api/models/org/name/revision/main", APIURL{Kind: APIInfo, Repo: model("org/name"), Rev: "main"}},
		{"/api/models/org/name/revision/refs%2Fpr%2F3", APIURL{Kind: APIInfo, Repo: model("org/name"), Rev: "refs/pr/3"}},
		{"/api/models/org/name/revision/refs/pr/3", APIURL{Kind: APIInfo, Repo: model("org/name"), Rev: "refs/pr/3"}},
		{"/api/datasets/org/ds/tree/main", APIURL{Kind: APITree, Repo: MustRepo(Dataset, "org/ds"), Rev: "main"}},
		{"/api/models/org/name/tree/main/sub%2Fdir", APIURL{Kind: APITree, Repo: model("org/name"), Rev: "main", Path: "sub/dir"}},
		{"/api/models/org/name/tree/refs/pr/1/sub", APIURL{Kind: APITree, Repo: model("org/name"), Rev: "refs/pr/1", Path: "sub"}},
		{"/api/models/org/name/paths-info/main", APIURL{Kind: APIPathsInfo, Repo: model("org/name"), Rev: "main"}},
		{"/api/models/org/name/xet-read-token/main", APIURL{Kind: APIXetToken, Repo: model("org/name"), Rev: "main"}},
		{"/api/models/org/name/refs", APIURL{Kind: APIOther}},
		{"/api/whoami-v2", APIURL{Kind: APIOther}},
		{"/api/models", APIURL{Kind: APIOther}},
	}
	for _, tt := range tests {
		got, err := ParseAPIURL(tt.in)
		if err != nil {
			t.Errorf("ParseAPIURL(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseAPIURL(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
	if _, err := ParseAPIURL("/api/models/org/name/tree/main/..%2F..%2Fx"); err == nil {
		t.Error("traversal in tree path accepted")
	}
}

// resolve-cache paths are parsed to their repo: the commit's place says
// where a one- or two-segment id ends; where it cannot, no repo is named.
func TestParseAPIURLResolveCache(t *testing.T) {
	const c = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		in   string
		want APIURL
	}{
		{"/api/resolve-cache/models/harness/tiny-gpt2/" + c + "/config.json", APIURL{Kind: APIResolveCache, Repo: MustRepo(Model, "harness/tiny-gpt2"), Rev: c, Path: "config.json"}},
		{"/api/resolve-cache/datasets/org/ds/" + c + "/data/x%20y.csv", APIURL{Kind: APIResolveCache, Repo: MustRepo(Dataset, "org/ds"), Rev: c, Path: "data/x y.csv"}},
		{"/api/resolve-cache/models/gpt2/" + c + "/config.json", APIURL{Kind: APIResolveCache, Repo: MustRepo(Model, "gpt2"), Rev: c, Path: "config.json"}},
		{"/api/resolve-cache/models/Harness/Tiny-GPT2/" + c + "/config.json", APIURL{Kind: APIResolveCache, Repo: MustRepo(Model, "Harness/Tiny-GPT2"), Rev: c, Path: "config.json"}},
		// No commit, or one in both places: the id's end is unknown.
		{"/api/resolve-cache/models/gpt2/main/config.json", APIURL{Kind: APIOther}},
		{"/api/resolve-cache/models/" + c + "/" + c + "/" + c + "/x", APIURL{Kind: APIOther}},
		{"/api/resolve-cache/nonsense/a/" + c + "/x", APIURL{Kind: APIOther}},
	}
	for _, tt := range tests {
		got, err := ParseAPIURL(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseAPIURL(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

// Paths a server in front of the Hub, or the Hub, could normalise into
// another path than the one parsed are refused whether or not the route is
// known; encoded slashes stay legal in revisions and tree paths.
func TestParseAPIURLRefusesAmbiguousPaths(t *testing.T) {
	const c = "0123456789abcdef0123456789abcdef01234567"
	for _, in := range []string{
		"/api/../harness/tiny-gpt2/resolve/main/config.json",
		"/api/./whoami-v2",
		"/api/%2e%2e/harness/tiny-gpt2/resolve/main/config.json",
		"/api/%2E%2E/harness/tiny-gpt2/resolve/main/config.json",
		"/api/%2e%2E/x",
		"/api/.%2e/x",
		"/api/%252e%252e/x",
		"/api/%25252E/x",
		"/api/models/harness/other/../tiny-gpt2",
		"/api/models/harness/other/discussions/%2e%2e%2f%2e%2e%2ftiny-gpt2",
		"/api/models/harness/other/tree/main/a/%2e%2e/b",
		"/api/models/harness%2Ftiny-gpt2/refs",
		"/api/models/harness%2ftiny-gpt2",
		"/api/models/harness%252Ftiny-gpt2/refs",
		"/api/models/harness/tiny%2Fgpt2/refs",
		"/api/models%2Fharness%2Ftiny-gpt2",
		"/api/models/harness%5Ctiny-gpt2/refs",
		"/api/models/harness%5ctiny-gpt2",
		`/api/models/harness\tiny-gpt2/refs`,
		"/api/models/harness/tiny-gpt2/tree/main/a%5Cb",
		"/api/resolve-cache/models/harness%2Ftiny-gpt2/" + c + "/config.json",
		"/api/resolve-cache/models/harness/tiny-gpt2/" + c + "/../x",
		"/api/resolve-cache/models/harness/tiny-gpt2/" + c + "/",
	} {
		_, err := ParseAPIURL(in)
		var inv *InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("ParseAPIURL(%q) = %v, want *InvalidError", in, err)
		}
	}
	for _, in := range []string{
		"/api/models/org/name/revision/refs%2Fpr%2F1",
		"/api/models/org/name/tree/refs%2Fpr%2F1/sub%2Fdir",
		"/api/models/org/name/discussions/a%2Fb",
		"/api/models/org/na.me",
		"/api/models/org/name/tree/main/.hidden/x..y",
		"/api/whoami-v2",
	} {
		if _, err := ParseAPIURL(in); err != nil {
			t.Errorf("ParseAPIURL(%q): %v", in, err)
		}
	}
}

// The slash of a repo id is literal on the file routes too.
func TestParseEscapedRepoRefusesEncodedSlash(t *testing.T) {
	for _, in := range []string{"harness%2Ftiny-gpt2", "harness%2ftiny-gpt2", "harness%252Ftiny-gpt2"} {
		if _, err := ParseEscapedRepo(Model, in); err == nil {
			t.Errorf("ParseEscapedRepo(%q) accepted", in)
		}
	}
	if _, err := ParseFileURL("/harness%2Ftiny-gpt2/resolve/main/config.json"); err == nil {
		t.Error("an encoded slash in a file URL's repo id was accepted")
	}
	if r, err := ParseEscapedRepo(Model, "harness/tiny%2Dgpt2"); err != nil || r.ID() != "harness/tiny-gpt2" {
		t.Errorf("ParseEscapedRepo(harness/tiny%%2Dgpt2) = %v, %v", r, err)
	}
}

// FuzzParseFileURL checks that whatever the URL, parsing never panics and
// anything accepted is safe to put on disk and in an upstream URL, and that
// re-escaping an accepted route parses back to the same route.
func FuzzParseFileURL(f *testing.F) {
	for _, s := range []string{
		"/gpt2/resolve/main/config.json", "/org/name/resolve/refs%2Fpr%2F1/a/b.bin", "/datasets/o/d/raw/v1/x",
		"/org/name/resolve/refs/pr/3/x", "/org/name/resolve/main/..%2F..%2Fetc", "/a/resolve/b/c/raw/d", "/%00/resolve/x/y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		fr, err := ParseFileURL(p)
		if err != nil {
			var inv *InvalidError
			if !errors.As(err, &inv) && !errors.Is(err, ErrNoRoute) {
				t.Fatalf("ParseFileURL(%q): unexpected error type %T", p, err)
			}
			return
		}
		if _, err := ParseRepo(fr.Repo.Type(), fr.Repo.ID()); err != nil {
			t.Fatalf("accepted invalid repo %q", fr.Repo.ID())
		}
		if ValidRevision(fr.Rev) != nil || ValidPath(fr.Path) != nil {
			t.Fatalf("accepted invalid rev %q or path %q", fr.Rev, fr.Path)
		}
		marker := "/resolve/"
		if fr.Raw {
			marker = "/raw/"
		}
		segs := strings.Split(fr.Path, "/")
		for i := range segs {
			segs[i] = url.PathEscape(segs[i])
		}
		again := "/" + fr.Repo.Type().URLPrefix() + fr.Repo.ID() + marker + url.PathEscape(fr.Rev) + "/" + strings.Join(segs, "/")
		if fr2, err := ParseFileURL(again); err != nil || fr2 != fr {
			t.Fatalf("round trip of %q via %q: %+v, %v", p, again, fr2, err)
		}
	})
}

func FuzzParseAPIURL(f *testing.F) {
	for _, s := range []string{"/api/models/org/name/tree/main/sub%2Fdir", "/api/datasets/o/d/revision/refs/pr/1", "/api/models/gpt2", "/api/spaces/x/y/paths-info/main"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		ar, err := ParseAPIURL(p)
		if err != nil || ar.Kind == APIOther {
			return
		}
		if _, err := ParseRepo(ar.Repo.Type(), ar.Repo.ID()); err != nil {
			t.Fatalf("accepted invalid repo %q", ar.Repo.ID())
		}
		if ar.Rev != "" && ValidRevision(ar.Rev) != nil || ar.Path != "" && ValidPath(ar.Path) != nil {
			t.Fatalf("accepted invalid rev %q or path %q", ar.Rev, ar.Path)
		}
	})
}
