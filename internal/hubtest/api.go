package hubtest

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// apiMarkers separate the repo id from the rest of an API path.
var apiMarkers = []string{"/revision/", "/tree/", "/paths-info/", "/xet-read-token/"}

// serveAPI routes /api/{type}s/{repo}[/{marker}/{tail}]; rest excludes "/api/".
func (h *Hub) serveAPI(w http.ResponseWriter, r *http.Request, rest string) {
	plural, after, _ := strings.Cut(rest, "/")
	t, ok := hub.ParseRepoType(plural)
	if !ok || after == "" {
		writeError(w, r, errNoRoute())
		return
	}
	repoEsc, marker, tail := after, "", ""
	if first := strings.IndexByte(after, '/'); first >= 0 {
		at := -1
		for _, m := range apiMarkers {
			if i := strings.Index(after[first:], m); i >= 0 && (at < 0 || first+i < at) {
				at, marker = first+i, m
			}
		}
		if at >= 0 {
			repoEsc, tail = after[:at], after[at+len(marker):]
		}
	}
	if strings.Count(repoEsc, "/") > 1 {
		writeError(w, r, errNoRoute())
		return
	}
	repo, valid := parseRepo(t, repoEsc)
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case marker == "/paths-info/" && r.Method == http.MethodPost:
		h.servePathsInfo(w, r, repo, valid, unescape(tail))
	case !get || marker == "/paths-info/":
		writeError(w, r, errMethod())
	case marker == "":
		h.serveRepoInfo(w, r, repo, valid, "HEAD")
	case marker == "/revision/":
		h.serveRepoInfo(w, r, repo, valid, unescape(tail))
	case marker == "/tree/":
		h.serveTree(w, r, repo, valid, tail)
	case marker == "/xet-read-token/":
		h.serveXetToken(w, r, repo, valid, unescape(tail))
	}
}

// apiDate formats t as the Hub does; clients require the trailing Z.
func apiDate(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

type repoInfoJSON struct {
	MongoID      string        `json:"_id"`
	ID           string        `json:"id"`
	ModelID      string        `json:"modelId,omitempty"`
	Author       string        `json:"author,omitempty"`
	SHA          string        `json:"sha"`
	Private      bool          `json:"private"`
	Gated        any           `json:"gated"` // false or "manual"
	Disabled     bool          `json:"disabled"`
	LastModified string        `json:"lastModified"`
	CreatedAt    string        `json:"createdAt"`
	Downloads    int           `json:"downloads"`
	Likes        int           `json:"likes"`
	Tags         []string      `json:"tags"`
	Siblings     []siblingJSON `json:"siblings"`
}

type siblingJSON struct {
	RFilename string      `json:"rfilename"`
	Size      int64       `json:"size"`
	BlobID    string      `json:"blobId"`
	LFS       *siblingLFS `json:"lfs,omitempty"`
}

type siblingLFS struct {
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	PointerSize int    `json:"pointerSize"`
}

// serveRepoInfo answers GET /api/{t}s/{repo}[/revision/{rev}]: every field,
// or with expand= only those asked for. Like the Hub, it answers a gated
// repo's info to anyone, and to an id in any case.
func (h *Hub) serveRepoInfo(w http.ResponseWriter, r *http.Request, asked hub.Repo, valid bool, rev string) {
	rs, e := h.openMeta(r, asked, valid)
	if e != nil {
		writeError(w, r, e)
		return
	}
	// The info names the repo by its canonical id (its "id", "_id",
	// "modelId", "author"), whatever case was asked, as the Hub does.
	repo := rs.repo
	c, e := h.commit(rs, rev)
	if e != nil {
		writeError(w, r, e)
		return
	}
	h.mu.RLock()
	private, gated := rs.private, rs.gated
	h.mu.RUnlock()
	mongo := sha1.Sum([]byte(repo.String()))
	info := repoInfoJSON{
		MongoID:      hex.EncodeToString(mongo[:12]),
		ID:           repo.ID(),
		SHA:          c.id,
		Private:      private,
		Gated:        false,
		LastModified: apiDate(c.date),
		CreatedAt:    apiDate(commitDate(0)),
		Tags:         []string{},
		Siblings:     []siblingJSON{},
	}
	if gated {
		info.Gated = "manual"
	}
	if repo.Type() == hub.Model {
		info.ModelID = repo.ID()
	}
	if ns, _, ok := strings.Cut(repo.ID(), "/"); ok {
		info.Author = ns
	}
	for _, te := range c.entries {
		if te.dir {
			continue
		}
		b := te.blob
		s := siblingJSON{RFilename: te.path, Size: b.size(), BlobID: b.oid}
		if b.lfs {
			s.LFS = &siblingLFS{Size: b.size(), SHA256: b.sha256, PointerSize: len(b.pointer)}
		}
		info.Siblings = append(info.Siblings, s)
	}
	if expand := r.URL.Query()["expand"]; len(expand) > 0 {
		writeJSON(w, r, http.StatusOK, project(info, expand))
		return
	}
	writeJSON(w, r, http.StatusOK, info)
}

// project is the Hub's answer to repo info with expand=: only "_id", "id"
// and the fields asked for (docs/hub-protocol.md §9). So an absent field
// means "not asked", never false: a client (or a proxy) that reads a
// missing "gated" as "not gated" is wrong. Fields the fake does not keep
// are left out, as an empty projection.
func project(info repoInfoJSON, expand []string) map[string]json.RawMessage {
	full, err := json.Marshal(info)
	if err != nil {
		panic(fmt.Sprintf("hubtest: marshal repo info: %v", err))
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(full, &all); err != nil {
		panic(fmt.Sprintf("hubtest: unmarshal repo info: %v", err))
	}
	out := map[string]json.RawMessage{"_id": all["_id"], "id": all["id"]}
	for _, f := range expand {
		if v, ok := all[f]; ok {
			out[f] = v
		}
	}
	return out
}

type entryJSON struct {
	Type       string          `json:"type"`
	OID        string          `json:"oid"`
	Size       int64           `json:"size"`
	Path       string          `json:"path"`
	LFS        *entryLFS       `json:"lfs,omitempty"`
	XetHash    string          `json:"xetHash,omitempty"`
	LastCommit *lastCommitJSON `json:"lastCommit,omitempty"`
}

type entryLFS struct {
	OID         string `json:"oid"`
	Size        int64  `json:"size"`
	PointerSize int    `json:"pointerSize"`
}

type lastCommitJSON struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Date  string `json:"date"`
}

// entry renders one tree entry as tree and paths-info list it. With expand,
// lastCommit is the commit listed (the fake keeps no per-file history).
func (h *Hub) entry(te treeEntry, c *commitObj, expand bool) entryJSON {
	e := entryJSON{Type: "file", OID: te.oid, Path: te.path}
	if te.dir {
		e.Type = "directory"
	} else {
		b := te.blob
		e.Size = b.size()
		if b.lfs {
			e.LFS = &entryLFS{OID: b.sha256, Size: b.size(), PointerSize: len(b.pointer)}
			if h.xet {
				e.XetHash = b.xetHash
			}
		}
	}
	if expand {
		e.LastCommit = &lastCommitJSON{ID: c.id, Title: "Upload folder using huggingface_hub", Date: apiDate(c.date)}
	}
	return e
}

// parseBool reads the Hub's boolean query values, which clients spell
// True, true or 1.
func parseBool(s string) bool {
	return strings.EqualFold(s, "true") || s == "1"
}

// serveTree answers GET /api/{t}s/{repo}/tree/{rev}[/{path}], paged with an
// absolute Link rel="next" as the Hub pages (docs/hub-protocol.md §3).
func (h *Hub) serveTree(w http.ResponseWriter, r *http.Request, repo hub.Repo, valid bool, tail string) {
	rs, e := h.openMeta(r, repo, valid)
	if e != nil {
		writeError(w, r, e)
		return
	}
	_, c, dir, e := h.splitRevPath(rs, tail)
	if e != nil {
		writeError(w, r, e)
		return
	}
	q := r.URL.Query()
	offset := 0
	if cur := q.Get("cursor"); cur != "" {
		id, off, ok := parseCursor(cur)
		if ok {
			// The cursor pins the commit, so a branch moving mid-listing
			// cannot mix two trees.
			c, e = h.commit(rs, id)
		}
		if !ok || e != nil {
			writeError(w, r, errBadRequest("Invalid cursor"))
			return
		}
		offset = off
	}
	entries, ok := c.list(strings.Trim(dir, "/"), parseBool(q.Get("recursive")))
	if !ok {
		writeError(w, r, errEntryNotFound(c.id))
		return
	}
	if offset > len(entries) {
		writeError(w, r, errBadRequest("Invalid cursor"))
		return
	}
	page := entries[offset:min(offset+h.pageSize, len(entries))]
	if next := offset + len(page); next < len(entries) {
		q.Set("cursor", makeCursor(c.id, next))
		w.Header().Set("Link", "<"+h.URL+r.URL.EscapedPath()+"?"+q.Encode()+`>; rel="next"`)
	}
	expand := parseBool(q.Get("expand"))
	out := make([]entryJSON, len(page))
	for i, te := range page {
		out[i] = h.entry(te, c, expand)
	}
	writeJSON(w, r, http.StatusOK, out)
}

// makeCursor encodes a listing position; clients treat it as opaque.
func makeCursor(commit string, offset int) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d", commit, offset))
}

func parseCursor(s string) (commit string, offset int, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", 0, false
	}
	commit, off, found := strings.Cut(string(raw), ":")
	offset, err = strconv.Atoi(off)
	return commit, offset, found && err == nil && offset >= 0 && hub.IsCommit(commit)
}

// servePathsInfo answers POST /api/{t}s/{repo}/paths-info/{rev} with the
// entries for the asked paths, silently omitting unknown ones.
func (h *Hub) servePathsInfo(w http.ResponseWriter, r *http.Request, repo hub.Repo, valid bool, rev string) {
	rs, e := h.openMeta(r, repo, valid)
	if e != nil {
		writeError(w, r, e)
		return
	}
	c, e := h.commit(rs, rev)
	if e != nil {
		writeError(w, r, e)
		return
	}
	paths, expand, err := readPathsInfo(w, r)
	if err != nil {
		writeError(w, r, errBadRequest("Invalid body: "+err.Error()))
		return
	}
	out := []entryJSON{}
	seen := map[string]bool{}
	for _, p := range paths {
		p = strings.Trim(p, "/")
		i, ok := c.index[p]
		if !ok || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, h.entry(c.entries[i], c, expand))
	}
	writeJSON(w, r, http.StatusOK, out)
}

// readPathsInfo reads either body form: Python's form-encoded
// "paths=a&paths=b&expand=False" or JS's JSON {"paths":[…],"expand":true}.
func readPathsInfo(w http.ResponseWriter, r *http.Request) (paths []string, expand bool, err error) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<20)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "application/json" {
		var body struct {
			Paths  []string `json:"paths"`
			Expand any      `json:"expand"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			return nil, false, err
		}
		switch v := body.Expand.(type) {
		case bool:
			expand = v
		case string:
			expand = parseBool(v)
		}
		return body.Paths, expand, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, false, err
	}
	return r.PostForm["paths"], parseBool(r.PostForm.Get("expand")), nil
}

// serveXetToken answers /xet-read-token/{rev} as the Hub does, so tests can
// count (and show the absence of) clients reaching for Xet.
func (h *Hub) serveXetToken(w http.ResponseWriter, r *http.Request, repo hub.Repo, valid bool, rev string) {
	h.stats.xet.Add(1)
	rs, e := h.open(r, repo, valid)
	if e != nil {
		writeError(w, r, e)
		return
	}
	if _, e := h.commit(rs, rev); e != nil {
		writeError(w, r, e)
		return
	}
	exp := time.Now().Add(time.Hour).Unix()
	hd := w.Header()
	hd.Set("X-Xet-Cas-Url", xetCASURL)
	hd.Set("X-Xet-Access-Token", "xet-fake-token")
	hd.Set("X-Xet-Token-Expiration", strconv.FormatInt(exp, 10))
	writeJSON(w, r, http.StatusOK, map[string]any{"casUrl": xetCASURL, "accessToken": "xet-fake-token", "exp": exp})
}
