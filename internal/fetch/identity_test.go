package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

const (
	wantSHA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	otherSH = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	wantGit = "cccccccccccccccccccccccccccccccccccccccc"
	otherGt = "dddddddddddddddddddddddddddddddddddddddd"
)

// describe answers every range with blob's bytes, claiming the file has
// total bytes and the given identity headers.
func describe(total int, headers map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var a, b int
		fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b)
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, total))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(blob[a : b+1])
	}
}

// A ranged answer about another file (a branch that moved, an upstream that
// serves the wrong object) never yields bytes; one about the right file, or
// carrying validators that cannot be compared, does.
func TestGetRangeRefusesAnotherFile(t *testing.T) {
	size := int64(len(blob))
	for _, tc := range []struct {
		name    string
		cdn     bool // served by a host other than the upstream
		total   int
		headers map[string]string
		want    Want
		ok      bool
	}{
		{"same file", false, len(blob), map[string]string{"ETag": `"` + wantSHA + `"`}, Want{size, wantSHA}, true},
		{"other size", false, len(blob) + 1, nil, Want{size, wantSHA}, false},
		{"other size on a CDN", true, len(blob) - 1, nil, Want{size, wantSHA}, false},
		{"other X-Linked-Etag", false, len(blob), map[string]string{"X-Linked-Etag": `"` + otherSH + `"`}, Want{size, wantSHA}, false},
		{"other X-Linked-Etag on a CDN", true, len(blob), map[string]string{"X-Linked-Etag": otherSH}, Want{size, wantSHA}, false},
		{"hub answer, other sha256 ETag", false, len(blob), map[string]string{"ETag": `"` + otherSH + `"`, "X-Repo-Commit": testCommit}, Want{size, wantSHA}, false},
		{"hub answer, other git ETag", false, len(blob), map[string]string{"ETag": `W/"` + otherGt + `"`, "X-Repo-Commit": testCommit}, Want{size, wantGit}, false},
		{"hub answer on another host", true, len(blob), map[string]string{"ETag": `"` + otherGt + `"`, "X-Repo-Commit": testCommit}, Want{size, wantGit}, false},
		// The CDN's own ETag is never the hub's (on its own host or on the
		// hub's), an LFS file's pointer oid is not its content hash: none
		// says anything about identity.
		{"CDN's own ETag", true, len(blob), map[string]string{"ETag": `"` + otherSH + `"`}, Want{size, wantSHA}, true},
		{"blob route on the hub's host", false, len(blob), map[string]string{"ETag": `"` + otherSH + `"`}, Want{size, wantSHA}, true},
		{"pointer oid upstream", false, len(blob), map[string]string{"ETag": `"` + otherGt + `"`, "X-Repo-Commit": testCommit}, Want{size, wantSHA}, true},
		{"opaque ETag upstream", false, len(blob), map[string]string{"ETag": `"v2-xyz"`, "X-Repo-Commit": testCommit}, Want{size, wantGit}, true},
		{"nothing to check", false, len(blob) + 5, map[string]string{"ETag": `"` + otherSH + `"`}, Want{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newServer(t, describe(tc.total, tc.headers))
			base := up.URL
			if tc.cdn {
				base = "https://hub.invalid"
			}
			c := newClient(t, base, nil)
			rc, err := c.GetRange(context.Background(), up.URL+"/file", "", tc.want, 100, 50)
			if !tc.ok {
				var pe *ProtocolError
				if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "another file") {
					t.Fatalf("err = %v, want a ProtocolError about another file", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rc.Close()
		})
	}
}

// A file resolved at a branch is fetched at its commit, wherever the upstream
// serves it from itself; CDN URLs and the hub's commit-addressed redirects
// are left alone.
func TestResolvePinsDownloadsToTheCommit(t *testing.T) {
	meta := map[string]string{"X-Repo-Commit": testCommit, "ETag": `"` + wantGit + `"`, "Content-Length": "10"}
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "/moved/"):
			w.Header().Set("Location", "/api/resolve-cache/models/org/m/"+testCommit+"/f.json?etag="+wantGit)
			w.WriteHeader(http.StatusFound)
		default:
			headHandler(meta)(w, r)
		}
	})
	c := newClient(t, up.URL, nil)
	for _, tc := range []struct{ repo, rev, path, want string }{
		{"org/m", "main", "f.json", "/org/m/resolve/" + testCommit + "/f.json"},
		{"org/m", "v1.0", "dir/f.json", "/org/m/resolve/" + testCommit + "/dir/f.json"},
		{"org/m", testCommit, "f.json", "/org/m/resolve/" + testCommit + "/f.json"},
		// A path that happens to contain the branch name is not touched.
		{"org/m", "main", "resolve/main/f.json", "/org/m/resolve/" + testCommit + "/resolve/main/f.json"},
		{"org/moved", "main", "f.json", "/api/resolve-cache/models/org/m/" + testCommit + "/f.json"},
	} {
		repo := hub.MustRepo(hub.Model, tc.repo)
		m, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: repo, Rev: tc.rev, Path: tc.path})
		if err != nil {
			t.Fatalf("%s@%s: %v", tc.path, tc.rev, err)
		}
		if m.DownloadURL != up.URL+tc.want {
			t.Errorf("%s %s@%s: DownloadURL = %q, want %q", tc.repo, tc.path, tc.rev, m.DownloadURL, up.URL+tc.want)
		}
	}
}
