package hubtest

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

func TestResolveLFSRedirect(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	sha := refSHA256(f.weights)
	for _, method := range []string{"HEAD", "GET"} {
		resp, body := do(t, method, h.URL+"/acme/model/resolve/main/model.safetensors")
		wantStatus(t, resp, 302)
		loc := resp.Header.Get("Location")
		if !strings.HasPrefix(loc, h.CDNURL+"/blobs/"+sha+"?") {
			t.Fatalf("Location %q is not an absolute CDN URL for %s", loc, sha)
		}
		q, _ := url.Parse(loc)
		for _, k := range []string{"Expires", "X-Amz-Expires", "X-Amz-Signature"} {
			if q.Query().Get(k) == "" {
				t.Errorf("Location lacks %s: %q", k, loc)
			}
		}
		if q.Query().Get("X-Amz-Expires") != "3600" {
			t.Errorf("X-Amz-Expires = %q", q.Query().Get("X-Amz-Expires"))
		}
		wantHeader(t, resp, "X-Repo-Commit", f.commit)
		wantHeader(t, resp, "X-Linked-Etag", `"`+sha+`"`)
		wantHeader(t, resp, "X-Linked-Size", strconv.Itoa(len(f.weights)))
		wantHeader(t, resp, "ETag", `"`+refGitSHA1(refPointer(f.weights))+`"`)
		info, _ := h.Stat(model, "main", "model.safetensors")
		wantHeader(t, resp, "X-Xet-Hash", info.XetHash)
		route := "/api/models/acme/model/xet-read-token/" + f.commit
		wantHeader(t, resp, "X-Xet-Refresh-Route", route)
		wantHeader(t, resp, "Link", "<"+h.URL+route+`>; rel="xet-auth"`)
		cl, _ := strconv.Atoi(resp.Header.Get("Content-Length"))
		if cl == 0 || cl == len(f.weights) || (method == "GET" && cl != len(body)) {
			t.Errorf("%s: Content-Length %d should be the redirect body's own (%d)", method, cl, len(body))
		}

		// The CDN serves the bytes without any of the hub's metadata.
		cdn, data := do(t, method, loc)
		wantStatus(t, cdn, 200)
		if method == "GET" && !bytes.Equal(data, f.weights) {
			t.Fatal("CDN body differs from the file")
		}
		wantHeader(t, cdn, "Content-Length", strconv.Itoa(len(f.weights)))
		wantHeader(t, cdn, "X-Repo-Commit", "")
		wantHeader(t, cdn, "X-Linked-Etag", "")
	}
}

func TestResolveNoXet(t *testing.T) {
	h := NewT(t, Options{XetHeaders: new(false)})
	addFixture(t, h)
	resp, _ := do(t, "HEAD", h.URL+"/acme/model/resolve/main/model.safetensors")
	wantStatus(t, resp, 302)
	for _, k := range []string{"X-Xet-Hash", "X-Xet-Refresh-Route", "Link"} {
		wantHeader(t, resp, k, "")
	}
	_, body := do(t, "GET", h.URL+"/api/models/acme/model/tree/main")
	if bytes.Contains(body, []byte("xetHash")) {
		t.Errorf("tree has xetHash without XetHeaders: %s", body)
	}
	resp, _ = do(t, "GET", h.URL+"/acme/model/resolve/main/model.safetensors", "Accept: application/vnd.xet-fileinfo+json, */*")
	wantStatus(t, resp, 302)
}

func TestResolveRegularRedirect(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	for _, tc := range []struct {
		path string
		data []byte
	}{{"config.json", f.config}, {"big.dat", f.big}, {"sub/dir/notes.txt", f.notes}} {
		oid := refGitSHA1(tc.data)
		resp, _ := do(t, "HEAD", h.URL+"/acme/model/resolve/main/"+tc.path)
		wantStatus(t, resp, 302)
		loc := resp.Header.Get("Location")
		want := "/api/resolve-cache/models/acme/model/" + f.commit + "/" + tc.path + "?etag=" + oid
		if loc != want {
			t.Fatalf("Location = %q, want relative %q", loc, want)
		}
		wantHeader(t, resp, "X-Linked-Etag", "")
		for _, method := range []string{"HEAD", "GET"} {
			resp, body := do(t, method, h.URL+loc)
			wantStatus(t, resp, 200)
			wantHeader(t, resp, "ETag", `"`+oid+`"`)
			wantHeader(t, resp, "X-Repo-Commit", f.commit)
			wantHeader(t, resp, "Content-Length", strconv.Itoa(len(tc.data)))
			wantHeader(t, resp, "Accept-Ranges", "bytes")
			if method == "GET" && !bytes.Equal(body, tc.data) {
				t.Errorf("%s: body differs", tc.path)
			}
		}
		resp, body := do(t, "GET", h.URL+loc, "Range: bytes=2-5")
		wantStatus(t, resp, 206)
		wantHeader(t, resp, "Content-Range", "bytes 2-5/"+strconv.Itoa(len(tc.data)))
		if !bytes.Equal(body, tc.data[2:6]) {
			t.Errorf("%s: range body %q", tc.path, body)
		}
	}
}

func TestResolveRevisions(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	next := h.Commit(model, "", []File{{Path: "config.json", Data: []byte(`{"v":2}`)}})
	h.SetRef(model, "refs/pr/1", f.commit)
	h.SetRef(model, "v1.0", f.commit)
	gpt2 := h.AddRepo(RepoSpec{ID: "gpt2", Files: []File{{Path: "a.txt", Data: []byte("a")}}})
	ds := h.AddRepo(RepoSpec{Type: hub.Dataset, ID: "acme/data", Branch: "dev", Files: []File{{Path: "x/y.csv", Data: []byte("1,2")}}})

	for _, tc := range []struct {
		url, commit string
	}{
		{"/acme/model/resolve/main/config.json", next},
		{"/acme/model/resolve/HEAD/config.json", next},
		{"/acme/model/resolve/refs%2Fpr%2F1/config.json", f.commit},
		{"/acme/model/resolve/refs/pr/1/config.json", f.commit},
		{"/acme/model/resolve/v1.0/config.json", f.commit},
		{"/acme/model/resolve/refs%2Ftags%2Fv1.0/config.json", f.commit},
		{"/acme/model/resolve/" + f.commit + "/config.json", f.commit},
		{"/acme/model/raw/refs/pr/1/config.json", f.commit},
		{"/gpt2/resolve/main/a.txt", gpt2},
		{"/datasets/acme/data/resolve/dev/x/y.csv", ds},
		{"/datasets/acme/data/resolve/dev/x%2Fy.csv", ds},
	} {
		resp, _ := do(t, "GET", h.URL+tc.url)
		if resp.StatusCode != 302 && resp.StatusCode != 200 {
			t.Fatalf("%s: status %d (%s)", tc.url, resp.StatusCode, resp.Header.Get("X-Error-Code"))
		}
		if loc := resp.Header.Get("Location"); loc != "" {
			resp, _ = do(t, "GET", h.URL+loc)
		}
		wantHeader(t, resp, "X-Repo-Commit", tc.commit)
	}
	// The old commit still serves the old bytes; the branch serves the new.
	_, old := do(t, "GET", h.URL+"/acme/model/raw/"+f.commit+"/config.json")
	_, cur := do(t, "GET", h.URL+"/acme/model/raw/main/config.json")
	if !bytes.Equal(old, f.config) || string(cur) != `{"v":2}` {
		t.Errorf("old %q, current %q", old, cur)
	}
	// The new commit has only the files it was given.
	resp, _ := do(t, "HEAD", h.URL+"/acme/model/resolve/main/model.safetensors")
	wantStatus(t, resp, 404)
}

func TestCommitIDsAreDeterministic(t *testing.T) {
	spec := RepoSpec{ID: "a/b", Files: []File{{Path: "f", Data: []byte("x")}}}
	h1, h2 := NewT(t, Options{}), NewT(t, Options{})
	c1, c2 := h1.AddRepo(spec), h2.AddRepo(spec)
	if c1 != c2 || !hub.IsCommit(c1) {
		t.Fatalf("commits %q and %q", c1, c2)
	}
	n1 := h1.Commit(hub.MustRepo(hub.Model, "a/b"), "", spec.Files)
	if n1 == c1 {
		t.Error("a second commit with the same files reused the id")
	}
}

func TestResolveErrors(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	for _, tc := range []struct {
		name, method, url, token string
		status                   int
		code                     string
		commit                   string
	}{
		{"unknown repo anon", "HEAD", "/acme/nope/resolve/main/x", "", 401, CodeRepoNotFound, ""},
		{"unknown repo token", "GET", "/acme/nope/resolve/main/x", "hf_x", 404, CodeRepoNotFound, ""},
		{"invalid repo id", "GET", "/acme/no--pe/resolve/main/x", "", 401, CodeRepoNotFound, ""},
		{"unknown revision", "GET", "/acme/model/resolve/nope/config.json", "", 404, CodeRevisionNotFound, ""},
		{"unknown commit", "GET", "/acme/model/resolve/" + strings.Repeat("a", 40) + "/config.json", "", 404, CodeRevisionNotFound, ""},
		{"unknown file", "GET", "/acme/model/resolve/main/nope.json", "", 404, CodeEntryNotFound, f.commit},
		{"directory", "HEAD", "/acme/model/resolve/main/sub", "", 404, CodeEntryNotFound, f.commit},
		{"unknown raw file", "HEAD", "/acme/model/raw/main/nope.json", "", 404, CodeEntryNotFound, f.commit},
		{"unknown route", "GET", "/acme/model/blob/main/x", "", 404, "", ""},
		{"bad method", "POST", "/acme/model/resolve/main/config.json", "", 405, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.token != "" {
				hdr = append(hdr, "Authorization: Bearer "+tc.token)
			}
			resp, body := do(t, tc.method, h.URL+tc.url, hdr...)
			wantStatus(t, resp, tc.status)
			wantHeader(t, resp, "X-Error-Code", tc.code)
			wantHeader(t, resp, "X-Repo-Commit", tc.commit)
			wantHeader(t, resp, "Content-Type", "application/json; charset=utf-8")
			if resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-Error-Message") == "" {
				t.Error("missing X-Request-Id or X-Error-Message")
			}
			if tc.method == "GET" {
				var e struct{ Error string }
				if err := json.Unmarshal(body, &e); err != nil || e.Error != resp.Header.Get("X-Error-Message") {
					t.Errorf("body %q: %v", body, err)
				}
			}
		})
	}
}

func TestRaw(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	resp, body := do(t, "GET", h.URL+"/acme/model/raw/main/config.json")
	wantStatus(t, resp, 200)
	wantHeader(t, resp, "ETag", `"`+refGitSHA1(f.config)+`"`)
	if !bytes.Equal(body, f.config) {
		t.Errorf("raw config = %q", body)
	}
	resp, body = do(t, "GET", h.URL+"/acme/model/raw/main/model.safetensors")
	wantStatus(t, resp, 200)
	if !bytes.Equal(body, refPointer(f.weights)) {
		t.Errorf("raw LFS file = %q, want its pointer", body)
	}
	wantHeader(t, resp, "X-Repo-Commit", f.commit)
	resp, _ = do(t, "HEAD", h.URL+"/acme/model/raw/main/config.json")
	wantStatus(t, resp, 200)
	wantHeader(t, resp, "Content-Length", strconv.Itoa(len(f.config)))
}

func TestXetFileInfo(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	resp, body := do(t, "GET", h.URL+"/acme/model/resolve/main/model.safetensors",
		"Accept: application/vnd.xet-fileinfo+json, */*", "Range: bytes=0-0")
	wantStatus(t, resp, 200)
	wantHeader(t, resp, "Content-Type", "application/vnd.xet-fileinfo+json")
	wantHeader(t, resp, "X-Linked-Size", strconv.Itoa(len(f.weights)))
	if l := resp.Header.Get("Link"); !strings.Contains(l, `rel="xet-reconstruction-info"`) || !strings.Contains(l, `rel="xet-auth"`) {
		t.Errorf("Link = %q", l)
	}
	if !json.Valid(body) {
		t.Errorf("body %q", body)
	}
	resp, _ = do(t, "GET", h.URL+"/api/models/acme/model/xet-read-token/main")
	wantStatus(t, resp, 200)
	if resp.Header.Get("X-Xet-Cas-Url") == "" || resp.Header.Get("X-Xet-Access-Token") == "" {
		t.Error("xet-read-token lacks its headers")
	}
	if got := h.Counters().XetRequests; got != 2 {
		t.Errorf("XetRequests = %d, want 2", got)
	}
}
