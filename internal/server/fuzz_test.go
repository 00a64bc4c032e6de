package server

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

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
		if _, err := hub.ParseRepo(hub.Model, tr.repo.ID()); err != nil || hub.ValidRevision(tr.rev) != nil {
			t.Fatalf("accepted invalid repo %q or revision %q", tr.repo.ID(), tr.rev)
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
