package dirhub

import (
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

var plainFiles = map[string]string{
	"org/plain/config.json":           `{"model_type":"llama"}`,
	"org/plain/model.safetensors":     "not really safetensors, but LFS by suffix",
	"org/plain/sub/notes.txt":         "small text",
	"org/plain/sub/deep/big.dat":      strings.Repeat("x", 2048), // LFS by size (threshold 1 KiB)
	"org/plain/.git/HEAD":             "ref: refs/heads/main",
	"org/plain/.cache/huggingface/x":  "local_dir bookkeeping",
	"gpt2/config.json":                `{"n_layer":12}`,
	"datasets/org/data/train.parquet": "rows",
	"emptyns/.keep/placeholder.txt":   "a namespace folder holds only folders",
}

func TestPlainResolveHeaders(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, plainFiles)
	_, srv := newTestHub(t, dir, Options{LFSThreshold: 1024})

	resp, body := do(t, "HEAD", srv.URL+"/org/plain/resolve/main/config.json", nil, nil)
	commit := resp.Header.Get("X-Repo-Commit")
	if resp.StatusCode != 200 || !hub.IsCommit(commit) || body != "" {
		t.Fatalf("HEAD config.json: %d, commit %q", resp.StatusCode, commit)
	}
	if got, want := resp.Header.Get("ETag"), strconv.Quote(gitSHA1(plainFiles["org/plain/config.json"])); got != want {
		t.Errorf("regular file ETag = %s, want the git blob sha1 %s", got, want)
	}
	if resp.Header.Get("X-Linked-Etag") != "" || resp.Header.Get("X-Linked-Size") != "" || resp.Header.Get("Location") != "" {
		t.Errorf("regular file has LFS or redirect headers: %v", resp.Header)
	}
	if resp.ContentLength != int64(len(plainFiles["org/plain/config.json"])) || resp.Header.Get("Accept-Ranges") != "bytes" {
		t.Errorf("Content-Length %d, Accept-Ranges %q", resp.ContentLength, resp.Header.Get("Accept-Ranges"))
	}

	for _, p := range []string{"model.safetensors", "sub/deep/big.dat"} {
		data := plainFiles["org/plain/"+p]
		resp, _ := do(t, "HEAD", srv.URL+"/org/plain/resolve/main/"+p, nil, nil)
		want := strconv.Quote(sha256Hex(data))
		if resp.Header.Get("ETag") != want || resp.Header.Get("X-Linked-Etag") != want ||
			resp.Header.Get("X-Linked-Size") != strconv.Itoa(len(data)) || resp.Header.Get("X-Repo-Commit") != commit {
			t.Errorf("LFS-like %s: headers %v, want ETag %s", p, resp.Header, want)
		}
	}

	// Ranges, /raw/, the commit itself as revision, and a dataset.
	resp, body = do(t, "GET", srv.URL+"/org/plain/raw/"+commit+"/sub/deep/big.dat", map[string]string{"Range": "bytes=10-13"}, nil)
	if resp.StatusCode != 206 || body != "xxxx" || resp.Header.Get("Content-Range") != "bytes 10-13/2048" {
		t.Errorf("range GET: %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Range"))
	}
	resp, _ = do(t, "GET", srv.URL+"/org/plain/resolve/main/config.json", map[string]string{"Range": "bytes=5000-"}, nil)
	if resp.StatusCode != 416 {
		t.Errorf("range past EOF: %d, want 416", resp.StatusCode)
	}
	if resp, body := do(t, "GET", srv.URL+"/datasets/org/data/resolve/main/train.parquet", nil, nil); resp.StatusCode != 200 || body != "rows" {
		t.Errorf("dataset file: %d %q", resp.StatusCode, body)
	}
	if resp, body := do(t, "GET", srv.URL+"/gpt2/resolve/HEAD/config.json", nil, nil); resp.StatusCode != 200 || body != plainFiles["gpt2/config.json"] {
		t.Errorf("one-segment repo: %d %q", resp.StatusCode, body)
	}
}

func TestPlainErrorsAndSkips(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, plainFiles)
	_, srv := newTestHub(t, dir, Options{})

	resp, _ := do(t, "HEAD", srv.URL+"/org/plain/resolve/main/config.json", nil, nil)
	commit := resp.Header.Get("X-Repo-Commit")

	resp, _ = do(t, "GET", srv.URL+"/org/plain/resolve/main/missing.json", nil, nil)
	wantError(t, resp, 404, CodeEntryNotFound)
	if resp.Header.Get("X-Repo-Commit") != commit {
		t.Errorf("EntryNotFound without X-Repo-Commit")
	}
	for _, p := range []string{".git/HEAD", ".cache/huggingface/x"} {
		resp, _ = do(t, "GET", srv.URL+"/org/plain/resolve/main/"+p, nil, nil)
		wantError(t, resp, 404, CodeEntryNotFound)
	}
	resp, _ = do(t, "GET", srv.URL+"/org/plain/resolve/v1.0/config.json", nil, nil)
	wantError(t, resp, 404, CodeRevisionNotFound)
	resp, _ = do(t, "GET", srv.URL+"/org/plain/resolve/"+strings.Repeat("a", 40)+"/config.json", nil, nil)
	wantError(t, resp, 404, CodeRevisionNotFound)
	resp, _ = do(t, "GET", srv.URL+"/org/absent/resolve/main/config.json", nil, nil)
	wantError(t, resp, 401, CodeRepoNotFound)
	resp, _ = do(t, "GET", srv.URL+"/org/absent/resolve/main/config.json", map[string]string{"Authorization": "Bearer x"}, nil)
	wantError(t, resp, 404, CodeRepoNotFound)
	// A namespace folder is not a one-segment repo; "datasets" is not a
	// model namespace.
	resp, _ = do(t, "GET", srv.URL+"/emptyns/resolve/main/.keep/placeholder.txt", nil, nil)
	wantError(t, resp, 401, CodeRepoNotFound)
	resp, _ = do(t, "GET", srv.URL+"/datasets/org/resolve/main/data/train.parquet", nil, nil)
	wantError(t, resp, 401, CodeRepoNotFound)
	resp, _ = do(t, "POST", srv.URL+"/org/plain/resolve/main/config.json", nil, nil)
	if resp.StatusCode != 405 {
		t.Errorf("POST on a file: %d", resp.StatusCode)
	}
	resp, _ = do(t, "GET", srv.URL+"/api/models/org/plain/xet-read-token/main", nil, nil)
	if resp.StatusCode != 404 {
		t.Errorf("xet-read-token: %d", resp.StatusCode)
	}
}

func TestPlainCommitFollowsChanges(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, plainFiles)
	h, srv := newTestHub(t, dir, Options{})

	head := func() (string, string) {
		resp, _ := do(t, "HEAD", srv.URL+"/org/plain/resolve/main/model.safetensors", nil, nil)
		return resp.Header.Get("X-Repo-Commit"), resp.Header.Get("ETag")
	}
	c1, e1 := head()
	if c2, e2 := head(); c1 != c2 || e1 != e2 {
		t.Fatalf("unstable: %s %s vs %s %s", c1, e1, c2, e2)
	}
	name := filepath.Join(dir, "org", "plain", "model.safetensors")
	if err := os.WriteFile(name, []byte("new weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	os.Chtimes(name, later, later)
	c3, e3 := head()
	if c3 == c1 || e3 != strconv.Quote(sha256Hex("new weights")) {
		t.Errorf("after a change: commit %s (was %s), etag %s", c3, c1, e3)
	}
	resp, _ := do(t, "GET", srv.URL+"/org/plain/resolve/"+c1+"/config.json", nil, nil)
	wantError(t, resp, 404, CodeRevisionNotFound)
	if n := h.hashes.done.Len(); n != 2 {
		t.Errorf("hash cache holds %d entries, want 2 (one per version)", n)
	}
}

func TestPlainAPI(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, plainFiles)
	_, srv := newTestHub(t, dir, Options{LFSThreshold: 1024})
	base := srv.URL + "/api/models/org/plain"

	resp, body := do(t, "GET", base+"/revision/main", nil, nil)
	var info struct {
		ID       string `json:"id"`
		SHA      string `json:"sha"`
		Siblings []struct {
			RFilename string `json:"rfilename"`
			Size      int64  `json:"size"`
			BlobID    string `json:"blobId"`
			LFS       *struct {
				SHA256 string `json:"sha256"`
			} `json:"lfs"`
		} `json:"siblings"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil || resp.StatusCode != 200 {
		t.Fatalf("info: %d %v %s", resp.StatusCode, err, body)
	}
	if info.ID != "org/plain" || !hub.IsCommit(info.SHA) || len(info.Siblings) != 4 || info.Siblings[0].RFilename != "config.json" || info.Siblings[0].BlobID != "" {
		t.Errorf("info = %+v", info)
	}
	_, body = do(t, "GET", base+"?blobs=True", nil, nil)
	json.Unmarshal([]byte(body), &info)
	if s := info.Siblings[1]; s.RFilename != "model.safetensors" || s.LFS == nil || s.LFS.SHA256 != sha256Hex(plainFiles["org/plain/model.safetensors"]) {
		t.Errorf("info?blobs=True sibling = %+v", s)
	}

	_, body = do(t, "GET", base+"/tree/main", nil, nil)
	if got := paths(decodeEntries(t, body)); got != "f:config.json f:model.safetensors d:sub" {
		t.Errorf("tree = %s", got)
	}
	_, body = do(t, "GET", base+"/tree/main?recursive=True&expand=true", nil, nil)
	es := decodeEntries(t, body)
	if got := paths(es); got != "f:config.json f:model.safetensors d:sub d:sub/deep f:sub/deep/big.dat f:sub/notes.txt" {
		t.Errorf("recursive tree = %s", got)
	}
	big := es[4]
	if big.LFS == nil || big.LFS.OID != sha256Hex(plainFiles["org/plain/sub/deep/big.dat"]) || big.Size != 2048 || big.LastCommit == nil ||
		big.OID != gitSHA1(string(hub.LFSPointer(big.LFS.OID, 2048))) || big.LFS.PointerSize != len(hub.LFSPointer(big.LFS.OID, 2048)) {
		t.Errorf("LFS entry = %+v", big)
	}
	if notes := es[5]; notes.LFS != nil || notes.OID != gitSHA1("small text") {
		t.Errorf("regular entry = %+v", notes)
	}
	_, body = do(t, "GET", base+"/tree/main/sub%2Fdeep", nil, nil)
	if got := paths(decodeEntries(t, body)); got != "f:sub/deep/big.dat" {
		t.Errorf("tree of sub/deep = %s", got)
	}
	_, body = do(t, "GET", base+"/tree/main/sub/notes.txt", nil, nil)
	if got := paths(decodeEntries(t, body)); got != "f:sub/notes.txt" {
		t.Errorf("tree of a file = %s", got)
	}
	resp, _ = do(t, "GET", base+"/tree/main/nope", nil, nil)
	wantError(t, resp, 404, CodeEntryNotFound)

	form := url.Values{"paths": {"config.json", "sub", "missing", "sub/deep/big.dat"}, "expand": {"False"}}
	_, body = do(t, "POST", base+"/paths-info/main", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, strings.NewReader(form.Encode()))
	if got := paths(decodeEntries(t, body)); got != "f:config.json d:sub f:sub/deep/big.dat" {
		t.Errorf("paths-info (form) = %s", got)
	}
	_, body = do(t, "POST", base+"/paths-info/main", map[string]string{"Content-Type": "application/json"}, strings.NewReader(`{"paths":["model.safetensors"],"expand":true}`))
	if es := decodeEntries(t, body); len(es) != 1 || es[0].LastCommit == nil || es[0].LFS == nil {
		t.Errorf("paths-info (JSON) = %s", body)
	}
	resp, _ = do(t, "GET", srv.URL+"/api/datasets/org/data/revision/main", nil, nil)
	if resp.StatusCode != 200 {
		t.Errorf("dataset info: %d", resp.StatusCode)
	}
}

func TestWarmHashesEveryPlainRepo(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, plainFiles)
	h, srv := newTestHub(t, dir, Options{})
	if err := h.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	// org/plain's 4 files, gpt2's and the dataset's; nothing under .git,
	// .cache or the namespace-only folder.
	if n := h.hashes.done.Len(); n != 6 {
		t.Errorf("Warm hashed %d files, want 6", n)
	}
	do(t, "HEAD", srv.URL+"/org/plain/resolve/main/model.safetensors", nil, nil)
	if n := h.hashes.done.Len(); n != 6 {
		t.Errorf("a HEAD after Warm hashed again (%d entries)", n)
	}
	h.Close()
	if err := h.Warm(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Warm after Close: %v", err)
	}
}
