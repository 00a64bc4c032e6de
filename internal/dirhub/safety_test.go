package dirhub

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNothingOutsideRootIsServed plants every kind of escape: symlinks out of
// the root (relative and absolute, files and folders), a repo folder that is
// a link out, an HF snapshot link out, and dot-dot URLs. Only links that stay
// inside the root are followed.
func TestNothingOutsideRootIsServed(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "top secret", "repo/config.json": "outside repo"})
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"org/plain/config.json": "{}",
		"gpt2/config.json":      `{"n_layer":12}`,
	})
	repo := filepath.Join(dir, "org", "plain")
	symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(repo, "abs.txt"))
	rel, err := filepath.Rel(repo, filepath.Join(outside, "secret.txt"))
	if err != nil {
		t.Fatal(err)
	}
	symlink(t, rel, filepath.Join(repo, "rel.txt"))
	symlink(t, outside, filepath.Join(repo, "outdir"))
	symlink(t, "../../gpt2/config.json", filepath.Join(repo, "inside.json"))
	symlink(t, filepath.Join(dir, "gpt2", "config.json"), filepath.Join(repo, "abs-inside.json"))
	symlink(t, filepath.Join(outside, "repo"), filepath.Join(dir, "evil", "repo"))
	c := strings.Repeat("c", 40)
	writeTree(t, dir, map[string]string{"models--org--hf/refs/main": c})
	symlink(t, "../../../../"+filepath.Base(outside)+"/secret.txt", filepath.Join(dir, "models--org--hf", "snapshots", c, "secret.txt"))
	writeTree(t, dir, map[string]string{"models--org--hf/snapshots/" + c + "/ok.txt": "ok"})

	_, srv := newTestHub(t, dir, Options{})
	for _, p := range []string{"abs.txt", "rel.txt", "outdir/secret.txt", "abs-inside.json", "..%2F..%2F..%2Fsecret.txt", "%2e%2e/secret.txt"} {
		resp, body := do(t, "GET", srv.URL+"/org/plain/resolve/main/"+p, nil, nil)
		if strings.Contains(body, "secret") || resp.StatusCode != 404 {
			t.Errorf("%s: %d %q", p, resp.StatusCode, body)
		}
	}
	if resp, body := do(t, "GET", srv.URL+"/org/plain/resolve/main/inside.json", nil, nil); resp.StatusCode != 200 || body != `{"n_layer":12}` {
		t.Errorf("a link inside the root: %d %q", resp.StatusCode, body)
	}
	_, body := do(t, "GET", srv.URL+"/api/models/org/plain/tree/main?recursive=true", nil, nil)
	if got := paths(decodeEntries(t, body)); got != "f:config.json f:inside.json" {
		t.Errorf("tree lists %s", got)
	}
	resp, _ := do(t, "GET", srv.URL+"/evil/repo/resolve/main/config.json", nil, nil)
	wantError(t, resp, 401, CodeRepoNotFound)
	for _, u := range []string{"/api/models/..%2F" + filepath.Base(outside) + "/revision/main", "/%2e%2e/x/resolve/main/secret.txt"} {
		if resp, body := do(t, "GET", srv.URL+u, nil, nil); resp.StatusCode < 400 || strings.Contains(body, "secret") {
			t.Errorf("%s: %d %q", u, resp.StatusCode, body)
		}
	}
	_, body = do(t, "GET", srv.URL+"/api/models/org/hf/tree/main", nil, nil)
	if got := paths(decodeEntries(t, body)); got != "f:ok.txt" {
		t.Errorf("HF snapshot tree lists %s", got)
	}
	resp, _ = do(t, "GET", srv.URL+"/org/hf/resolve/main/secret.txt", nil, nil)
	wantError(t, resp, 404, CodeEntryNotFound)
}
