package server

import (
	"errors"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// FuzzParseFileRoute checks that whatever the URL, parsing never panics and
// anything accepted is safe to put on disk and in an upstream URL, and that
// re-escaping an accepted route parses back to the same route.
func FuzzParseFileRoute(f *testing.F) {
	for _, s := range []string{
		"/gpt2/resolve/main/config.json", "/org/name/resolve/refs%2Fpr%2F1/a/b.bin", "/datasets/o/d/raw/v1/x",
		"/org/name/resolve/refs/pr/3/x", "/org/name/resolve/main/..%2F..%2Fetc", "/a/resolve/b/c/raw/d", "/%00/resolve/x/y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		fr, err := parseFileRoute(p)
		if err != nil {
			var inv *hub.InvalidError
			if !errors.As(err, &inv) && !errors.Is(err, errNoRoute) {
				t.Fatalf("parseFileRoute(%q): unexpected error type %T", p, err)
			}
			return
		}
		if _, err := hub.ParseRepo(fr.repo.Type, fr.repo.ID); err != nil {
			t.Fatalf("accepted invalid repo %q", fr.repo.ID)
		}
		if hub.ValidRevision(fr.rev) != nil || hub.ValidPath(fr.path) != nil {
			t.Fatalf("accepted invalid rev %q or path %q", fr.rev, fr.path)
		}
		marker := "/resolve/"
		if fr.raw {
			marker = "/raw/"
		}
		segs := strings.Split(fr.path, "/")
		for i := range segs {
			segs[i] = url.PathEscape(segs[i])
		}
		again := "/" + fr.repo.Type.URLPrefix() + fr.repo.ID + marker + url.PathEscape(fr.rev) + "/" + strings.Join(segs, "/")
		if fr2, err := parseFileRoute(again); err != nil || fr2 != fr {
			t.Fatalf("round trip of %q via %q: %+v, %v", p, again, fr2, err)
		}
	})
}

func FuzzParseAPIRoute(f *testing.F) {
	for _, s := range []string{"/api/models/org/name/tree/main/sub%2Fdir", "/api/datasets/o/d/revision/refs/pr/1", "/api/models/gpt2", "/api/spaces/x/y/paths-info/main"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		ar, err := parseAPIRoute(p)
		if err != nil || ar.kind == apiPass {
			return
		}
		if _, err := hub.ParseRepo(ar.repo.Type, ar.repo.ID); err != nil {
			t.Fatalf("accepted invalid repo %q", ar.repo.ID)
		}
		if ar.rev != "" && hub.ValidRevision(ar.rev) != nil || ar.path != "" && hub.ValidPath(ar.path) != nil {
			t.Fatalf("accepted invalid rev %q or path %q", ar.rev, ar.path)
		}
	})
}

func FuzzParseTensorRoute(f *testing.F) {
	f.Add("/models/org/m/tensors/model.layers.0.weight", "revision=main&shard=0:1/2")
	f.Add("/models/gpt2/safetensors", "name=a&prefix=b")
	f.Fuzz(func(t *testing.T, p, q string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.URL = &url.URL{Path: "/", RawPath: p, RawQuery: q}
		if u, err := url.Parse(p); err == nil {
			r.URL.Path = u.Path
		}
		tr, err := parseTensorRoute(r)
		if err != nil {
			return
		}
		if _, err := hub.ParseRepo(hub.Model, tr.repo.ID); err != nil || hub.ValidRevision(tr.rev) != nil {
			t.Fatalf("accepted invalid repo %q or revision %q", tr.repo.ID, tr.rev)
		}
		if tr.file != "" && hub.ValidPath(tr.file) != nil || len(tr.name) > MaxTensorName {
			t.Fatalf("accepted invalid file %q or name", tr.file)
		}
	})
}

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
