package dirhub

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// The JSON API, in the Hub's shapes (docs/hub-protocol.md §3). Listings are not
// paginated: clients accept a single page, and hubproxy caches it whole.

// apiDate formats t as the Hub does; clients require the trailing Z.
func apiDate(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

type repoInfoJSON struct {
	MongoID      string        `json:"_id"`
	ID           string        `json:"id"`
	ModelID      string        `json:"modelId,omitempty"`
	Author       string        `json:"author,omitempty"`
	SHA          string        `json:"sha"`
	Private      bool          `json:"private"`
	Gated        bool          `json:"gated"`
	Disabled     bool          `json:"disabled"`
	LastModified string        `json:"lastModified"`
	Tags         []string      `json:"tags"`
	Siblings     []siblingJSON `json:"siblings"`
}

type siblingJSON struct {
	RFilename string      `json:"rfilename"`
	Size      int64       `json:"size"`
	BlobID    string      `json:"blobId,omitempty"`
	LFS       *siblingLFS `json:"lfs,omitempty"`
}

type siblingLFS struct {
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	PointerSize int    `json:"pointerSize"`
}

type entryJSON struct {
	Type       string          `json:"type"`
	OID        string          `json:"oid"`
	Size       int64           `json:"size"`
	Path       string          `json:"path"`
	LFS        *entryLFS       `json:"lfs,omitempty"`
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

// parseBool reads the Hub's boolean query values: True, true or 1.
func parseBool(s string) bool { return strings.EqualFold(s, "true") || s == "1" }

// serveInfo answers GET /api/{t}s/{repo}[/revision/{rev}]. Blob ids and LFS
// details, which cost a hash of every file, come only with blobs=true, as on
// the Hub.
func (h *Hub) serveInfo(w http.ResponseWriter, r *http.Request, rt route) {
	s, herr := h.open(rt.repo, rt.rev)
	if herr != nil {
		writeError(w, r, herr)
		return
	}
	mongo := sha1.Sum([]byte(rt.repo.String()))
	info := repoInfoJSON{
		MongoID:      hex.EncodeToString(mongo[:12]),
		ID:           rt.repo.ID(),
		SHA:          s.commit,
		LastModified: apiDate(s.date),
		Tags:         []string{},
		Siblings:     make([]siblingJSON, len(s.files)),
	}
	if rt.repo.Type() == hub.Model {
		info.ModelID = rt.repo.ID()
	}
	if ns, _, ok := strings.Cut(rt.repo.ID(), "/"); ok {
		info.Author = ns
	}
	for i, f := range s.files {
		info.Siblings[i] = siblingJSON{RFilename: f.path, Size: f.size}
	}
	if parseBool(r.URL.Query().Get("blobs")) {
		metas, err := h.metas(r.Context(), s.files)
		if err != nil {
			h.writeMetaError(w, r, err)
			return
		}
		for i, m := range metas {
			info.Siblings[i].BlobID = m.oid
			if m.lfs {
				info.Siblings[i].LFS = &siblingLFS{Size: s.files[i].size, SHA256: m.etag, PointerSize: len(hub.LFSPointer(m.etag, s.files[i].size))}
			}
		}
	}
	writeJSON(w, r, http.StatusOK, info)
}

// metas returns the metadata of files, hashing them concurrently.
func (h *Hub) metas(ctx context.Context, files []fileEntry) ([]fileMeta, error) {
	waits := make([]func(context.Context) (fileMeta, error), len(files))
	for i, f := range files {
		waits[i] = h.metaStart(f)
	}
	out := make([]fileMeta, len(files))
	for i, wait := range waits {
		m, err := wait(ctx)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

func (h *Hub) writeMetaError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client is gone
	}
	h.log.Warn("dirhub: hashing", "path", r.URL.Path, "err", err)
	writeError(w, r, errInternal())
}

// treeItem is a file or a folder of a snapshot's tree.
type treeItem struct {
	path string
	file *fileEntry // nil for a folder
}

// tree lists the snapshot's files and the folders their paths imply, sorted
// by path, so a folder precedes its contents.
func (s *snapshot) tree() []treeItem {
	dirs := map[string]bool{}
	var out []treeItem
	for i := range s.files {
		f := &s.files[i]
		out = append(out, treeItem{path: f.path, file: f})
		for d := f.path; ; {
			i := strings.LastIndexByte(d, '/')
			if i < 0 {
				break
			}
			d = d[:i]
			if dirs[d] {
				break
			}
			dirs[d] = true
			out = append(out, treeItem{path: d})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// entries renders items as tree and paths-info list them.
func (h *Hub) entries(ctx context.Context, s *snapshot, items []treeItem, expand bool) ([]entryJSON, error) {
	var files []fileEntry
	for _, it := range items {
		if it.file != nil {
			files = append(files, *it.file)
		}
	}
	metas, err := h.metas(ctx, files)
	if err != nil {
		return nil, err
	}
	out := make([]entryJSON, 0, len(items))
	for _, it := range items {
		var e entryJSON
		if it.file == nil {
			sum := sha1.Sum([]byte("tree\x00" + s.commit + "\x00" + it.path))
			e = entryJSON{Type: "directory", OID: hex.EncodeToString(sum[:]), Path: it.path}
		} else {
			m := metas[0]
			metas = metas[1:]
			e = entryJSON{Type: "file", OID: m.oid, Size: it.file.size, Path: it.path}
			if m.lfs {
				e.LFS = &entryLFS{OID: m.etag, Size: it.file.size, PointerSize: len(hub.LFSPointer(m.etag, it.file.size))}
			}
		}
		if expand {
			e.LastCommit = &lastCommitJSON{ID: s.commit, Title: "Local directory served by hubproxy", Date: apiDate(s.date)}
		}
		out = append(out, e)
	}
	return out, nil
}

// serveTree answers GET /api/{t}s/{repo}/tree/{rev}[/{path}][?recursive=].
// A file path lists that file; a missing one is EntryNotFound.
func (h *Hub) serveTree(w http.ResponseWriter, r *http.Request, rt route) {
	s, herr := h.open(rt.repo, rt.rev)
	if herr != nil {
		writeError(w, r, herr)
		return
	}
	q := r.URL.Query()
	recursive := parseBool(q.Get("recursive"))
	prefix := ""
	if rt.path != "" {
		prefix = rt.path + "/"
	}
	var items []treeItem
	found := rt.path == ""
	for _, it := range s.tree() {
		if it.path == rt.path {
			found = true
			if it.file != nil {
				items = append(items, it)
			}
			continue
		}
		rest, under := strings.CutPrefix(it.path, prefix)
		if under && (recursive || !strings.Contains(rest, "/")) {
			items = append(items, it)
		}
	}
	if !found {
		writeError(w, r, errEntryNotFound(s.commit))
		return
	}
	out, err := h.entries(r.Context(), s, items, parseBool(q.Get("expand")))
	if err != nil {
		h.writeMetaError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, out)
}

// servePathsInfo answers POST /api/{t}s/{repo}/paths-info/{rev}, with a
// form body (Python) or JSON (JS); unknown paths are silently omitted.
func (h *Hub) servePathsInfo(w http.ResponseWriter, r *http.Request, rt route) {
	s, herr := h.open(rt.repo, rt.rev)
	if herr != nil {
		writeError(w, r, herr)
		return
	}
	paths, expand, err := readPathsInfo(w, r)
	if err != nil {
		writeError(w, r, &hubError{status: http.StatusBadRequest, msg: "Invalid body: " + err.Error()})
		return
	}
	want := map[string]bool{}
	for _, p := range paths {
		want[strings.Trim(p, "/")] = true
	}
	var items []treeItem
	for _, it := range s.tree() {
		if want[it.path] {
			items = append(items, it)
		}
	}
	out, err := h.entries(r.Context(), s, items, expand)
	if err != nil {
		h.writeMetaError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, out)
}

// readPathsInfo reads either body form: "paths=a&paths=b&expand=False" or
// {"paths":[…],"expand":true}.
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
