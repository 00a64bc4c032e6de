package dirhub

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hfRepo lays out models--org--cached as huggingface_hub does: blobs named
// by ETag, relative snapshot symlinks, refs without a newline.
func hfRepo(t *testing.T, root string) (c1, c2 string) {
	t.Helper()
	repo := filepath.Join(root, "models--org--cached")
	c1, c2 = strings.Repeat("1", 40), strings.Repeat("2", 40)
	cfg := `{"hidden_size":8}`
	weights := "pretend safetensors"
	// The blob name is trusted as the ETag: this one deliberately does not
	// hash to its content, to show nothing is re-hashed.
	fakeETag := strings.Repeat("f", 64)
	writeTree(t, repo, map[string]string{
		"blobs/" + gitSHA1(cfg):         cfg,
		"blobs/" + sha256Hex(weights):   weights,
		"blobs/" + fakeETag:             "v2 weights",
		"refs/main":                     c2,
		"refs/refs/pr/1":                c1,
		".no_exist/" + c1 + "/tok.json": "",
	})
	symlink(t, "../../blobs/"+gitSHA1(cfg), filepath.Join(repo, "snapshots", c1, "config.json"))
	symlink(t, "../../../blobs/"+sha256Hex(weights), filepath.Join(repo, "snapshots", c1, "sub", "w.safetensors"))
	symlink(t, "../../blobs/"+gitSHA1(cfg), filepath.Join(repo, "snapshots", c2, "config.json"))
	symlink(t, "../../blobs/"+fakeETag, filepath.Join(repo, "snapshots", c2, "w.safetensors"))
	// Evicted blob: the link dangles and the file is simply absent.
	symlink(t, "../../blobs/"+strings.Repeat("e", 64), filepath.Join(repo, "snapshots", c2, "gone.safetensors"))
	// A plain copy (no symlink), as on filesystems without links.
	writeTree(t, filepath.Join(repo, "snapshots", c2), map[string]string{"README.md": "# cached"})
	return c1, c2
}

func TestHFCacheResolve(t *testing.T) {
	dir := t.TempDir()
	c1, c2 := hfRepo(t, dir)
	// A plain folder of the same id loses to the cache layout.
	writeTree(t, dir, map[string]string{"org/cached/config.json": "plain"})
	_, srv := newTestHub(t, dir, Options{})

	resp, body := do(t, "GET", srv.URL+"/org/cached/resolve/main/config.json", nil, nil)
	if resp.StatusCode != 200 || body != `{"hidden_size":8}` || resp.Header.Get("X-Repo-Commit") != c2 ||
		resp.Header.Get("ETag") != strconv.Quote(gitSHA1(body)) || resp.Header.Get("X-Linked-Etag") != "" {
		t.Errorf("main/config.json: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = do(t, "HEAD", srv.URL+"/org/cached/resolve/main/w.safetensors", nil, nil)
	if want := strconv.Quote(strings.Repeat("f", 64)); resp.Header.Get("X-Linked-Etag") != want || resp.Header.Get("X-Linked-Size") != "10" {
		t.Errorf("blob name not used as ETag: %v", resp.Header)
	}
	for _, rev := range []string{"refs%2Fpr%2F1", "refs/pr/1", c1} {
		resp, body = do(t, "GET", srv.URL+"/org/cached/resolve/"+rev+"/sub/w.safetensors", nil, nil)
		if resp.StatusCode != 200 || body != "pretend safetensors" || resp.Header.Get("X-Repo-Commit") != c1 {
			t.Errorf("%s: %d %q commit %s", rev, resp.StatusCode, body, resp.Header.Get("X-Repo-Commit"))
		}
	}
	resp, body = do(t, "GET", srv.URL+"/org/cached/resolve/main/README.md", nil, nil)
	if resp.StatusCode != 200 || resp.Header.Get("ETag") != strconv.Quote(gitSHA1("# cached")) {
		t.Errorf("plain copy in a snapshot: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = do(t, "GET", srv.URL+"/org/cached/resolve/main/gone.safetensors", nil, nil)
	wantError(t, resp, 404, CodeEntryNotFound)
	resp, _ = do(t, "GET", srv.URL+"/org/cached/resolve/"+strings.Repeat("3", 40)+"/config.json", nil, nil)
	wantError(t, resp, 404, CodeRevisionNotFound)
	resp, _ = do(t, "GET", srv.URL+"/org/cached/resolve/dev/config.json", nil, nil)
	wantError(t, resp, 404, CodeRevisionNotFound)

	_, body = do(t, "GET", srv.URL+"/api/models/org/cached/tree/"+c1+"?recursive=1", nil, nil)
	if got := paths(decodeEntries(t, body)); got != "f:config.json d:sub f:sub/w.safetensors" {
		t.Errorf("tree = %s", got)
	}
	_, body = do(t, "GET", srv.URL+"/api/models/org/cached", nil, nil)
	if !strings.Contains(body, `"sha":"`+c2+`"`) {
		t.Errorf("info at HEAD = %s", body)
	}
}

func TestHFCacheWithoutRefsUsesNewestSnapshot(t *testing.T) {
	dir := t.TempDir()
	_, c2 := hfRepo(t, dir)
	repo := filepath.Join(dir, "models--org--cached")
	os.RemoveAll(filepath.Join(repo, "refs"))
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(repo, "snapshots", strings.Repeat("1", 40)), old, old)
	_, srv := newTestHub(t, dir, Options{})
	resp, _ := do(t, "HEAD", srv.URL+"/org/cached/resolve/main/config.json", nil, nil)
	if resp.StatusCode != 200 || resp.Header.Get("X-Repo-Commit") != c2 {
		t.Errorf("without refs/main: %d commit %s, want %s", resp.StatusCode, resp.Header.Get("X-Repo-Commit"), c2)
	}
	resp, _ = do(t, "HEAD", srv.URL+"/org/cached/resolve/refs%2Fpr%2F1/config.json", nil, nil)
	wantError(t, resp, 404, CodeRevisionNotFound)
}
