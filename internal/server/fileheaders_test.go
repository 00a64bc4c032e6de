package server

import (
	"mime"
	"net/http"
	"path"
	"testing"

	"github.com/hubproxy/hubproxy/internal/resolver"
)

// The file headers are written straight into the map on the warm path;
// they must still be what a client parses, names that need escaping
// included.
func TestFileHeaders(t *testing.T) {
	var m resolver.Meta
	m.Commit, m.ETag, m.Size = "0123456789abcdef0123456789abcdef01234567", "abc", 42
	for _, c := range []struct {
		name, disposition, ctype string
	}{
		{"sub/model.safetensors", `inline; filename*=UTF-8''model.safetensors; filename="model.safetensors"`, "application/octet-stream"},
		{"config.json", `inline; filename*=UTF-8''config.json; filename="config.json"`, "application/json"},
		{`we"ird na\me.bin`, `inline; filename*=UTF-8''we%22ird%20na%5Cme.bin; filename="we_ird na_me.bin"`, "application/octet-stream"},
		{"modèle.txt", `inline; filename*=UTF-8''mod%C3%A8le.txt; filename="mod_le.txt"`, "text/plain; charset=utf-8"},
	} {
		h := http.Header{}
		setFileHeaders(h, c.name, m)
		want := map[string]string{
			"X-Repo-Commit": m.Commit, "ETag": `"abc"`, "X-Linked-Etag": `"abc"`, "X-Linked-Size": "42",
			"Accept-Ranges": "bytes", "Content-Type": c.ctype, "Content-Disposition": c.disposition,
		}
		for k, v := range want {
			if got := h.Values(k); len(got) != 1 || got[0] != v {
				t.Errorf("%s: %s = %q, want %q", c.name, k, got, v)
			}
		}
		if len(h) != len(want) {
			t.Errorf("%s: %d headers, want %d: %v", c.name, len(h), len(want), h)
		}
		if _, params, err := mime.ParseMediaType(h.Get("Content-Disposition")); err != nil {
			t.Errorf("%s: Content-Disposition does not parse: %v", c.name, err)
		} else if params["filename"] != path.Base(c.name) {
			t.Errorf("%s: parsed filename %q", c.name, params["filename"])
		}
		h.Add("ETag", "extra") // a later Add must not write into a neighbour
		if h.Get("X-Linked-Etag") != `"abc"` {
			t.Errorf("%s: Add on ETag changed X-Linked-Etag to %q", c.name, h.Get("X-Linked-Etag"))
		}
	}
}
