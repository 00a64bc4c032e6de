package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// verifyContent checks a content answer against the hub's content answer h:
// the bytes, the headers naming them, and the JSON describing them, all
// against what the model computed itself.
func verifyContent(req *modelReq, ans *modelAnswer, h hubAnswer) error {
	c := h.c
	if rc := ans.header.Get("X-Repo-Commit"); rc != "" && rc != c.id {
		return fmt.Errorf("X-Repo-Commit %.8s, not commit %.8s", rc, c.id)
	}
	head := req.method == http.MethodHead
	switch req.route {
	case routeResolve, routeRaw:
		return verifyFile(req, ans, c.files[req.path])
	case routeInfo:
		if ans.status != http.StatusOK || head {
			return okStatus(ans)
		}
		return verifyInfo(req, ans, h)
	case routeTree, routePathsInfo:
		if ans.status != http.StatusOK || head {
			return okStatus(ans)
		}
		want, _ := c.listing(req.path)
		if req.route == routePathsInfo {
			want = map[string]int64{}
			for _, p := range req.paths {
				if f := c.files[p]; f != nil {
					want[p] = int64(len(f.data))
				}
			}
		}
		return verifyEntries(ans.body, c, want)
	}
	st := c.files["model.safetensors"]
	switch req.route {
	case routeTensor:
		t := st.tensors[req.names[0]]
		if err := okStatus(ans); err != nil {
			return err
		}
		if d := ans.header.Get("X-Tensor-Dtype"); d != "" && d != t.dtype {
			return fmt.Errorf("X-Tensor-Dtype %s, not %s", d, t.dtype)
		}
		if s, want := ans.header.Get("X-Tensor-Shape"), shapeString(t.shape); s != "" && s != want {
			return fmt.Errorf("X-Tensor-Shape %s, not %s", s, want)
		}
		return sameBody(req, ans, t.data)
	case routeTensorList:
		if ans.status != http.StatusOK || head {
			return okStatus(ans)
		}
		var l struct {
			Commit string `json:"commit"`
			Files  []struct {
				Path, ETag string
			} `json:"files"`
			Tensors []struct{ Name, DType string } `json:"tensors"`
		}
		if err := json.Unmarshal(ans.body, &l); err != nil {
			return fmt.Errorf("tensor listing: %v", err)
		}
		var names []string
		for _, t := range l.Tensors {
			names = append(names, t.Name)
		}
		slices.Sort(names)
		if l.Commit != c.id || len(l.Files) != 1 || normETag(l.Files[0].ETag) != st.sha256 || !slices.Equal(names, sortedKeys(st.tensors)) {
			return fmt.Errorf("tensor listing of commit %.8s, files %v, tensors %v; want commit %.8s, tensors %v",
				l.Commit, l.Files, names, c.id, sortedKeys(st.tensors))
		}
		return nil
	case routeSubset:
		if ans.status != http.StatusOK || head {
			return okStatus(ans)
		}
		got := parseSafetensors(ans.body)
		if len(got) != len(req.names) {
			return fmt.Errorf("subset holds %d tensors, want %v", len(got), req.names)
		}
		for _, n := range req.names {
			if !bytes.Equal(got[n].data, st.tensors[n].data) {
				return fmt.Errorf("subset tensor %s differs from commit %.8s's", n, c.id)
			}
		}
		return nil
	}
	return fmt.Errorf("no content expected on route %d", req.route)
}

func okStatus(ans *modelAnswer) error {
	if ans.status != http.StatusOK {
		return fmt.Errorf("status %d, want 200", ans.status)
	}
	return nil
}

func normETag(s string) string { return strings.Trim(strings.TrimPrefix(s, "W/"), `"`) }

// verifyFile checks a file answer: bytes, range, validators and size.
func verifyFile(req *modelReq, ans *modelAnswer, f *modelFile) error {
	want, etag := f.data, f.etag
	if req.route == routeRaw && f.lfs {
		// /raw/ of an LFS file is the pointer git stores, named by its oid.
		want, etag = lfsPointerText(f.sha256, len(f.data)), f.oid
	}
	if e := normETag(ans.header.Get("Etag")); e != "" && e != etag {
		return fmt.Errorf("ETag %s, not %s", e, etag)
	}
	if s := ans.header.Get("X-Linked-Size"); s != "" && s != strconv.Itoa(len(f.data)) {
		return fmt.Errorf("X-Linked-Size %s, not %d", s, len(f.data))
	}
	size := int64(len(want))
	switch ans.status {
	case http.StatusNotModified:
		if req.inm != etag {
			return fmt.Errorf("304 Not Modified for If-None-Match %q; this version's ETag is %s", req.inm, etag)
		}
		return nil
	case http.StatusRequestedRangeNotSatisfiable:
		if !req.hasRng || req.rng[0] < size {
			return fmt.Errorf("416 for range %v of a %d-byte file", req.rng, size)
		}
		if cr := ans.header.Get("Content-Range"); cr != "" && cr != fmt.Sprintf("bytes */%d", size) {
			return fmt.Errorf("416 with Content-Range %s for a %d-byte file", cr, size)
		}
		return nil
	case http.StatusPartialContent:
		if !req.hasRng || req.rng[0] >= size {
			return errors.New("206 for a request without a satisfiable range")
		}
		end := min(req.rng[1], size-1)
		if cr, w := ans.header.Get("Content-Range"), fmt.Sprintf("bytes %d-%d/%d", req.rng[0], end, size); cr != w {
			return fmt.Errorf("Content-Range %q, want %q", cr, w)
		}
		if !bytes.Equal(ans.body, want[req.rng[0]:end+1]) {
			return fmt.Errorf("206 body of %d bytes differs from bytes %d-%d of the file", len(ans.body), req.rng[0], end)
		}
		return nil
	case http.StatusOK:
		if req.inm == etag {
			return fmt.Errorf("200 for If-None-Match of this very version (%s)", etag)
		}
		return sameBody(req, ans, want)
	}
	return fmt.Errorf("status %d", ans.status)
}

// sameBody checks a 200's body (or, for HEAD, its Content-Length).
func sameBody(req *modelReq, ans *modelAnswer, want []byte) error {
	if req.method == http.MethodHead {
		if cl := ans.header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(want)) {
			return fmt.Errorf("HEAD Content-Length %s, want %d", cl, len(want))
		}
		return nil
	}
	if !bytes.Equal(ans.body, want) {
		return fmt.Errorf("a %d-byte body that is not the %d bytes of the file", len(ans.body), len(want))
	}
	return nil
}

// verifyInfo checks repo info: its id, commit, visibility fields (against
// the hub's state at that moment) and file list, whichever are present
// (expand= projects them).
func verifyInfo(req *modelReq, ans *modelAnswer, h hubAnswer) error {
	var info map[string]json.RawMessage
	if err := json.Unmarshal(ans.body, &info); err != nil {
		return fmt.Errorf("repo info: %v", err)
	}
	if id := string(info["id"]); id != strconv.Quote(modelRepoSpecs[req.repo].id) {
		return fmt.Errorf("repo info of %s", id)
	}
	if sha, ok := info["sha"]; ok && string(sha) != strconv.Quote(h.c.id) {
		return fmt.Errorf("repo info of commit %s, not %.8s", sha, h.c.id)
	}
	if p, ok := info["private"]; ok && string(p) != strconv.FormatBool(h.st.private[req.repo]) {
		return fmt.Errorf("repo info says private: %s; the hub's repo private=%v", p, h.st.private[req.repo])
	}
	if g, ok := info["gated"]; ok && (string(g) != "false") != h.st.gated[req.repo] {
		return fmt.Errorf("repo info says gated: %s; the hub's repo gated=%v", g, h.st.gated[req.repo])
	}
	if raw, ok := info["siblings"]; ok {
		var sibs []struct {
			Name string `json:"rfilename"`
			Size int64  `json:"size"`
		}
		if err := json.Unmarshal(raw, &sibs); err != nil {
			return fmt.Errorf("siblings: %v", err)
		}
		got := map[string]int64{}
		for _, s := range sibs {
			got[s.Name] = s.Size
		}
		for p, f := range h.c.files {
			if got[p] != int64(len(f.data)) {
				return fmt.Errorf("siblings %v do not list commit %.8s's files", got, h.c.id)
			}
		}
		if len(got) != len(h.c.files) {
			return fmt.Errorf("siblings %v do not list commit %.8s's files", got, h.c.id)
		}
	}
	return nil
}

// verifyEntries checks a tree or paths-info answer: exactly the entries of
// want (path → size, -1 a directory), each file with its oid and LFS sha256.
func verifyEntries(body []byte, c *modelCommit, want map[string]int64) error {
	var entries []struct {
		Type string `json:"type"`
		OID  string `json:"oid"`
		Size int64  `json:"size"`
		Path string `json:"path"`
		LFS  *struct {
			OID string `json:"oid"`
		} `json:"lfs"`
	}
	if err := json.Unmarshal(body, &entries); err != nil {
		return fmt.Errorf("entries: %v", err)
	}
	if len(entries) != len(want) {
		return fmt.Errorf("%d entries, want %d (%v) at commit %.8s", len(entries), len(want), sortedKeys(want), c.id)
	}
	for _, e := range entries {
		size, ok := want[e.Path]
		if !ok {
			return fmt.Errorf("entry %s is not at commit %.8s", e.Path, c.id)
		}
		if size < 0 {
			if e.Type != "directory" {
				return fmt.Errorf("entry %s is a %s, want a directory", e.Path, e.Type)
			}
			continue
		}
		f := c.files[e.Path]
		if e.Type != "file" || e.Size != size || e.OID != f.oid || f.lfs != (e.LFS != nil) || f.lfs && e.LFS.OID != f.sha256 {
			return fmt.Errorf("entry %s (%s, %d bytes, oid %.8s) is not commit %.8s's", e.Path, e.Type, e.Size, e.OID, c.id)
		}
	}
	return nil
}

// shapeString is a tensor's shape as X-Tensor-Shape writes it: "[16,8]".
func shapeString(shape []int64) string {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(dims, ",") + "]"
}
