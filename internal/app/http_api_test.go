package app_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

func manyFiles(n int) []hubtest.File {
	var fs []hubtest.File
	for i := range n {
		fs = append(fs, hubtest.File{Path: "dir/f" + string(rune('a'+i)) + ".txt", Data: []byte{byte(i)}})
	}
	return append(fs, hubtest.File{Path: "model.safetensors", Data: hubtest.RandomBytes(9, 2<<20)})
}

// The JS client accepts only `<absolute-url>; rel="next"` (docs/hub-protocol.md §3).
var nextLink = regexp.MustCompile(`^<(https?://[^>]+)>;\s+rel="next"$`)

func TestTreePaginationStaysOnTheProxy(t *testing.T) {
	e := newEnv(t, hubtest.Options{PageSize: 3}, nil)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: manyFiles(7)})

	next := "/api/models/org/model/tree/main?recursive=True&expand=False"
	seen := map[string]int{}
	pages := 0
	for next != "" {
		resp, body := e.Do(http.MethodGet, next)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", next, resp.StatusCode, body)
		}
		if bytes.Contains(body, []byte("xetHash")) {
			t.Errorf("page %d leaks xetHash", pages)
		}
		var entries []map[string]any
		if err := json.Unmarshal(body, &entries); err != nil {
			t.Fatal(err)
		}
		for _, en := range entries {
			seen[en["path"].(string)]++
		}
		pages++
		next = ""
		if l := resp.Header.Get("Link"); l != "" {
			m := nextLink.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("Link %q is not `<abs>; rel=\"next\"`", l)
			}
			if !strings.HasPrefix(m[1], e.Proxy.URL+"/") {
				t.Fatalf("Link %q does not point at the proxy %s", m[1], e.Proxy.URL)
			}
			u, _ := url.Parse(m[1])
			next = u.RequestURI()
		}
	}
	if pages < 3 {
		t.Errorf("only %d pages: pagination not exercised", pages)
	}
	for _, p := range []string{"dir", "dir/fa.txt", "dir/fg.txt", "model.safetensors"} {
		if seen[p] != 1 {
			t.Errorf("%s listed %d times", p, seen[p])
		}
	}
}

func TestPathsInfoFormAndJSON(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: manyFiles(2)})
	for _, tc := range []struct{ ct, body string }{
		{"application/x-www-form-urlencoded", "paths=model.safetensors&paths=dir/fa.txt&paths=nope&expand=False"},
		{"application/json", `{"paths":["model.safetensors","dir/fa.txt","nope"],"expand":true}`},
	} {
		req, _ := http.NewRequest(http.MethodPost, e.Proxy.URL+"/api/models/org/model/paths-info/main", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var entries []map[string]any
		err = json.NewDecoder(resp.Body).Decode(&entries)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", tc.ct, resp.StatusCode, err)
		}
		if len(entries) != 2 {
			t.Errorf("%s: %d entries, want 2", tc.ct, len(entries))
		}
		for _, en := range entries {
			if _, ok := en["xetHash"]; ok {
				t.Errorf("%s: xetHash leaked in %v", tc.ct, en["path"])
			}
			if en["path"] == "model.safetensors" && en["lfs"] == nil {
				t.Errorf("%s: lfs dropped", tc.ct)
			}
		}
	}
}

func TestModelInfoWritesRefsAndBranchMoves(t *testing.T) {
	clock := testutil.NewClock(time.Now())
	e := newEnv(t, hubtest.Options{}, func(c *app.Config) { c.RevisionTTL, c.Now = time.Minute, clock.Now })
	c1 := e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "a.txt", Data: []byte("one")}}})

	resp, body := e.Do(http.MethodGet, "/api/models/org/model/revision/main?expand=sha&expand=siblings")
	var info struct {
		ID       string `json:"id"`
		SHA      string `json:"sha"`
		Siblings []struct {
			RFilename string `json:"rfilename"`
		} `json:"siblings"`
	}
	if err := json.Unmarshal(body, &info); err != nil || resp.StatusCode != 200 {
		t.Fatalf("model info: %d %v", resp.StatusCode, err)
	}
	if info.ID != model.ID() || info.SHA != c1 || len(info.Siblings) != 1 {
		t.Errorf("model info = %+v", info)
	}
	if ref, _ := os.ReadFile(filepath.Join(e.Dir, "models--org--model", "refs", "main")); string(ref) != c1 {
		t.Errorf("refs/main = %q, want %s", ref, c1)
	}

	c2 := e.Hub.Commit(model, "main", []hubtest.File{{Path: "a.txt", Data: []byte("two")}})
	clock.Advance(2 * time.Minute) // the revision TTL lapses
	resp, body = e.Do(http.MethodGet, "/org/model/resolve/main/a.txt")
	if resp.Header.Get("X-Repo-Commit") != c2 || string(body) != "two" {
		t.Errorf("after the branch moved: commit %s body %q, want %s \"two\"", resp.Header.Get("X-Repo-Commit"), body, c2)
	}
	// The old commit is immutable and still served.
	if _, body = e.Do(http.MethodGet, "/org/model/resolve/"+c1+"/a.txt"); string(body) != "one" {
		t.Errorf("old commit body %q", body)
	}
	// refs/pr/N, encoded and not.
	e.Hub.SetRef(model, "refs/pr/1", c1)
	for _, p := range []string{"/org/model/resolve/refs%2Fpr%2F1/a.txt", "/org/model/resolve/refs/pr/1/a.txt"} {
		if resp, body := e.Do(http.MethodGet, p); resp.StatusCode != 200 || string(body) != "one" {
			t.Errorf("%s: %d %q", p, resp.StatusCode, body)
		}
	}
	if ref, _ := os.ReadFile(filepath.Join(e.Dir, "models--org--model", "refs", "refs", "pr", "1")); string(ref) != c1 {
		t.Errorf("refs/refs/pr/1 = %q", ref)
	}
}

func TestOfflineFallbackServesWhatIsCached(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := hubtest.RandomBytes(11, 3<<20)
	commit := e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{
		{Path: "w.safetensors", Data: data}, {Path: "other.bin", Data: hubtest.RandomBytes(12, 2<<20)},
	}})
	e.Do(http.MethodGet, "/org/model/resolve/main/w.safetensors")
	e.Do(http.MethodGet, "/api/models/org/model/revision/main")

	// Upstream goes away; a fresh proxy on the same cache dir has no
	// in-memory state and must answer from disk alone.
	e.Hub.Close()
	e.Start()
	resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/w.safetensors")
	if resp.StatusCode != 200 || sha(body) != sha(data) {
		t.Fatalf("offline GET: %d", resp.StatusCode)
	}
	resp, _ = e.Do(http.MethodHead, "/org/model/resolve/main/w.safetensors")
	if resp.Header.Get("X-Repo-Commit") != commit || resp.Header.Get("ETag") != `"`+sha(data)+`"` ||
		resp.Header.Get("Content-Length") != "3145728" {
		t.Errorf("offline HEAD headers: %v", resp.Header)
	}
	if resp, _ := e.Do(http.MethodGet, "/api/models/org/model/revision/main"); resp.StatusCode != 200 {
		t.Errorf("offline model info: %d", resp.StatusCode)
	}
	if resp, _ := e.Do(http.MethodGet, "/org/model/resolve/main/other.bin"); resp.StatusCode < 500 {
		t.Errorf("uncached file while upstream is down: %d, want a 5xx", resp.StatusCode)
	}

	// --offline answers from the cache without trying upstream at all.
	e.Cfg.Offline = true
	e.Start()
	if resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/w.safetensors"); resp.StatusCode != 200 || sha(body) != sha(data) {
		t.Errorf("offline mode GET: %d", resp.StatusCode)
	}
}

func TestAPIAnswersAreReusedWithinTheRevisionTTL(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	commit := e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: manyFiles(1)})
	for _, p := range []string{"/api/models/org/model/revision/main", "/api/models/org/model/tree/" + commit} {
		e.Hub.ResetCounters()
		for range 3 {
			if resp, _ := e.Do(http.MethodGet, p); resp.StatusCode != 200 {
				t.Fatalf("%s: %d", p, resp.StatusCode)
			}
		}
		if n := e.Hub.Counters().APIRequests; n != 1 {
			t.Errorf("%s: %d upstream API requests for 3 calls, want 1", p, n)
		}
	}
	// Another caller's credentials are never answered from this caller's entry.
	e.Hub.ResetCounters()
	e.Do(http.MethodGet, "/api/models/org/model/revision/main", "Authorization", "Bearer hf_other")
	if n := e.Hub.Counters().APIRequests; n != 1 {
		t.Errorf("a different caller was served another caller's cached answer")
	}
}
