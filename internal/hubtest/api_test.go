package hubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

type testEntry struct {
	Type string `json:"type"`
	OID  string `json:"oid"`
	Size int64  `json:"size"`
	Path string `json:"path"`
	LFS  *struct {
		OID         string `json:"oid"`
		Size        int64  `json:"size"`
		PointerSize int    `json:"pointerSize"`
	} `json:"lfs"`
	XetHash    string `json:"xetHash"`
	LastCommit *struct {
		ID, Date string
	} `json:"lastCommit"`
}

func getJSON(t *testing.T, url string, v any, hdr ...string) *http.Response {
	t.Helper()
	resp, body := do(t, "GET", url, hdr...)
	wantStatus(t, resp, 200)
	wantHeader(t, resp, "Content-Type", "application/json; charset=utf-8")
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
	return resp
}

func TestRepoInfo(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	h.SetRef(model, "refs/pr/1", f.commit)
	next := h.Commit(model, "", []File{{Path: "config.json", Data: f.config}})
	z := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	for _, tc := range []struct{ path, sha string }{
		{"/api/models/acme/model", next},
		{"/api/models/acme/model/revision/main", next},
		{"/api/models/acme/model/revision/HEAD", next},
		{"/api/models/acme/model/revision/refs%2Fpr%2F1", f.commit},
		{"/api/models/acme/model/revision/" + f.commit, f.commit},
	} {
		var info struct {
			MongoID      string `json:"_id"`
			ID, SHA      string
			Private      bool
			Gated        any
			Disabled     *bool
			LastModified string
			Tags         []string
			Siblings     []struct {
				RFilename, BlobID string
				Size              int64
				LFS               *struct {
					Size        int64
					SHA256      string
					PointerSize int
				}
			}
		}
		getJSON(t, h.URL+tc.path, &info)
		if info.ID != "acme/model" || info.SHA != tc.sha || info.MongoID == "" || info.Gated != false ||
			info.Disabled == nil || *info.Disabled || info.Tags == nil || !z.MatchString(info.LastModified) {
			t.Errorf("%s: %+v", tc.path, info)
		}
		if tc.sha != f.commit {
			continue
		}
		if len(info.Siblings) != 4 {
			t.Fatalf("%d siblings", len(info.Siblings))
		}
		for _, s := range info.Siblings {
			if s.RFilename == "model.safetensors" {
				if s.LFS == nil || s.LFS.SHA256 != refSHA256(f.weights) || s.LFS.PointerSize != len(refPointer(f.weights)) ||
					s.Size != int64(len(f.weights)) || s.BlobID != refGitSHA1(refPointer(f.weights)) {
					t.Errorf("LFS sibling %+v", s)
				}
			} else if s.LFS != nil {
				t.Errorf("regular sibling %s has lfs", s.RFilename)
			}
		}
	}
	resp, _ := do(t, "GET", h.URL+"/api/models/acme/model/revision/nope")
	wantStatus(t, resp, 404)
	wantHeader(t, resp, "X-Error-Code", CodeRevisionNotFound)

	g := h.AddRepo(RepoSpec{ID: "acme/g", Gated: true, ApprovedTokens: []string{"t"}})
	var info struct{ Gated any }
	getJSON(t, h.URL+"/api/models/acme/g", &info, "Authorization: Bearer t")
	if info.Gated != "manual" || g == "" {
		t.Errorf("gated = %v", info.Gated)
	}
}

func TestTreeEntries(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	var root []testEntry
	getJSON(t, h.URL+"/api/models/acme/model/tree/main", &root)
	var names []string
	for _, e := range root {
		names = append(names, e.Type+":"+e.Path)
	}
	want := []string{"file:big.dat", "file:config.json", "file:model.safetensors", "directory:sub"}
	if !slices.Equal(names, want) {
		t.Fatalf("root listing %v, want %v", names, want)
	}
	for _, e := range root {
		switch e.Path {
		case "model.safetensors":
			info, _ := h.Stat(model, "main", e.Path)
			if e.OID != refGitSHA1(refPointer(f.weights)) || e.Size != int64(len(f.weights)) || e.LFS == nil ||
				e.LFS.OID != refSHA256(f.weights) || e.LFS.Size != e.Size || e.LFS.PointerSize != len(refPointer(f.weights)) ||
				len(e.XetHash) != 64 || e.XetHash != info.XetHash || e.LastCommit != nil {
				t.Errorf("LFS entry %+v", e)
			}
		case "config.json":
			if e.OID != refGitSHA1(f.config) || e.LFS != nil || e.XetHash != "" {
				t.Errorf("regular entry %+v", e)
			}
		case "sub":
			if e.Size != 0 || len(e.OID) != 40 {
				t.Errorf("directory entry %+v", e)
			}
		}
	}

	// A sub-path arrives as "sub%2Fdir" from Python and raw from JS.
	for _, p := range []string{"sub%2Fdir", "sub/dir"} {
		var sub []testEntry
		getJSON(t, h.URL+"/api/models/acme/model/tree/main/"+p+"?expand=True", &sub)
		if len(sub) != 1 || sub[0].Path != "sub/dir/notes.txt" || sub[0].LastCommit == nil || sub[0].LastCommit.ID != f.commit {
			t.Errorf("%s: %+v", p, sub)
		}
	}
	var rec []testEntry
	getJSON(t, h.URL+"/api/models/acme/model/tree/main?recursive=1", &rec)
	if len(rec) != 6 { // 4 files and 2 directories
		t.Errorf("recursive listing has %d entries: %+v", len(rec), rec)
	}
	resp, _ := do(t, "GET", h.URL+"/api/models/acme/model/tree/main/nope")
	wantStatus(t, resp, 404)
	wantHeader(t, resp, "X-Error-Code", CodeEntryNotFound)
	resp, _ = do(t, "GET", h.URL+"/api/models/acme/model/tree/nope")
	wantHeader(t, resp, "X-Error-Code", CodeRevisionNotFound)
}

func TestTreePagination(t *testing.T) {
	h := NewT(t, Options{PageSize: 3})
	var files []File
	want := map[string]bool{}
	for i := range 10 {
		p := fmt.Sprintf("d%d/f%02d.txt", i%2, i)
		files = append(files, File{Path: p, Data: []byte(p)})
		want[p] = true
	}
	want["d0"], want["d1"] = true, true
	h.AddRepo(RepoSpec{ID: "acme/many", Files: files})
	h.SetRef(hubRepo("acme/many"), "refs/pr/7", h.Commit(hubRepo("acme/many"), "pr", files))

	for _, start := range []string{
		h.URL + "/api/models/acme/many/tree/main?recursive=True&expand=false",
		h.URL + "/api/models/acme/many/tree/refs/pr/7?recursive=true",
	} {
		seen := map[string]int{}
		url, pages := start, 0
		link := regexp.MustCompile(`^<(http://[^>]+)>;\s+rel="next"$`)
		for url != "" {
			var page []testEntry
			resp := getJSON(t, url, &page)
			pages++
			if len(page) > 3 {
				t.Fatalf("page of %d entries", len(page))
			}
			for _, e := range page {
				seen[e.Path]++
			}
			url = ""
			if l := resp.Header.Get("Link"); l != "" {
				m := link.FindStringSubmatch(l)
				if m == nil || !strings.HasPrefix(m[1], h.URL+"/api/models/acme/many/tree/") || !strings.Contains(m[1], "recursive=") {
					t.Fatalf("Link %q", l)
				}
				url = m[1]
			}
			if pages > 10 {
				t.Fatal("pagination does not end")
			}
		}
		if pages != 4 || len(seen) != len(want) {
			t.Errorf("%d pages, %d distinct entries, want 4 and %d", pages, len(seen), len(want))
		}
		for p, n := range seen {
			if n != 1 || !want[p] {
				t.Errorf("%s listed %d times", p, n)
			}
		}
	}
	resp, _ := do(t, "GET", h.URL+"/api/models/acme/many/tree/main?cursor=garbage")
	wantStatus(t, resp, 400)
}

func TestPathsInfo(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	url := h.URL + "/api/models/acme/model/paths-info/main"
	for _, tc := range []struct {
		name, ctype, body string
		expand            bool
	}{
		{"form", "application/x-www-form-urlencoded", "paths=config.json&paths=nope&paths=model.safetensors&paths=sub&expand=False", false},
		{"json", "application/json", `{"paths":["config.json","nope","model.safetensors","sub"],"expand":true}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(url, tc.ctype, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			wantStatus(t, resp, 200)
			var got []testEntry
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 || got[0].Path != "config.json" || got[1].Path != "model.safetensors" || got[2].Type != "directory" {
				t.Fatalf("entries %+v", got)
			}
			if got[1].LFS == nil || got[1].LFS.OID != refSHA256(f.weights) || got[0].OID != refGitSHA1(f.config) {
				t.Errorf("entries %+v", got)
			}
			if (got[0].LastCommit != nil) != tc.expand {
				t.Errorf("expand=%v but lastCommit %v", tc.expand, got[0].LastCommit)
			}
		})
	}
	resp, _ := do(t, "GET", url)
	wantStatus(t, resp, 405)
}

func TestUnknownAPI(t *testing.T) {
	h := NewT(t, Options{})
	addFixture(t, h)
	for _, p := range []string{"/api/whoami-v2", "/api/models/acme/model/commits/main", "/api/bogus/acme/model", "/nothing"} {
		resp, body := do(t, "GET", h.URL+p)
		wantStatus(t, resp, 404)
		wantHeader(t, resp, "Content-Type", "application/json; charset=utf-8")
		if !json.Valid(body) {
			t.Errorf("%s: body %q", p, body)
		}
	}
}
