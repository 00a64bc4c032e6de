package hubtest

import (
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// serveHub routes a request to the hub. It works on the escaped path and
// splits on the literal markers, never by counting segments, so
// "refs%2Fpr%2F1" and ids like "gpt2" route as the Hub routes them.
func (h *Hub) serveHub(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Request-Id", fmt.Sprintf("Root=1-00000000-%024x", h.reqID.Add(1)))
	p := r.URL.EscapedPath()
	switch {
	case h.cdnOnHub && strings.HasPrefix(p, "/cdn/"):
		h.serveCDN(w, r)
	case strings.HasPrefix(p, "/api/resolve-cache/"):
		h.stats.resolve.Add(1)
		if !h.fail5xx(w, r, classResolve) {
			h.serveResolveCache(w, r, strings.TrimPrefix(p, "/api/resolve-cache/"))
		}
	case p == "/" || p == "":
		// The front page answers whoever asks, as huggingface.co's does; a
		// proxy may probe it to tell an outage from failing routes, so an
		// outage (a TargetAny fault) takes it down too.
		if !h.fail5xx(w, r, classPage) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Content-Length", strconv.Itoa(len(frontPage)))
			if r.Method != http.MethodHead {
				_, _ = w.Write([]byte(frontPage))
			}
		}
	case strings.HasPrefix(p, "/api/"):
		h.stats.api.Add(1)
		if !h.fail5xx(w, r, classAPI) {
			h.serveAPI(w, r, strings.TrimPrefix(p, "/api/"))
		}
	default:
		u, ok := parseFileURL(p)
		if !ok {
			writeError(w, r, errNoRoute())
			return
		}
		h.stats.resolve.Add(1)
		if !h.fail5xx(w, r, classResolve) {
			h.serveFile(w, r, u)
		}
	}
}

const frontPage = "<!doctype html><title>Hugging Face</title>\n"

// fail5xx answers 503 if the Status5xx fault fires for this request, or 429
// if TooManyRequests does.
func (h *Hub) fail5xx(w http.ResponseWriter, r *http.Request, c class) bool {
	switch {
	case h.faults.take(faultStatus5xx, c, ""):
		w.Header().Set("Retry-After", "0")
		writeJSON(w, r, http.StatusServiceUnavailable, map[string]string{"error": "Service Unavailable"})
	case h.faults.take(faultTooManyRequests, c, ""):
		w.Header().Set("Retry-After", "0")
		writeJSON(w, r, http.StatusTooManyRequests, map[string]string{"error": "You have been rate-limited; you can retry this action in about 0 seconds."})
	default:
		return false
	}
	return true
}

// fileURL is a parsed /{prefix}{repo}/{resolve|raw}/{rev}/{path} URL.
type fileURL struct {
	repo  hub.Repo
	valid bool   // repo is a possible repository id
	raw   bool   // /raw/ rather than /resolve/
	rest  string // escaped "{rev}/{path}"
}

// parseFileURL recognises a file URL by its marker. The marker is searched
// after the repo id's first segment, so a repo named "raw" still routes.
func parseFileURL(p string) (fileURL, bool) {
	p = strings.TrimPrefix(p, "/")
	t := hub.Model
	if s, ok := strings.CutPrefix(p, "datasets/"); ok {
		t, p = hub.Dataset, s
	} else if s, ok := strings.CutPrefix(p, "spaces/"); ok {
		t, p = hub.Space, s
	}
	first := strings.IndexByte(p, '/')
	if first < 0 {
		return fileURL{}, false
	}
	at, marker := -1, ""
	for _, m := range []string{"/resolve/", "/raw/"} {
		if i := strings.Index(p[first:], m); i >= 0 && (at < 0 || first+i < at) {
			at, marker = first+i, m
		}
	}
	if at < 0 {
		return fileURL{}, false
	}
	repo, valid := parseRepo(t, p[:at]) // an invalid id leaves the zero Repo: open refuses it
	return fileURL{repo: repo, valid: valid, raw: marker == "/raw/", rest: p[at+len(marker):]}, true
}

// serveFile answers /resolve/ and /raw/ after the Hub's checks: repo and
// access, then revision, then file.
func (h *Hub) serveFile(w http.ResponseWriter, r *http.Request, u fileURL) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, r, errMethod())
		return
	}
	rs, e := h.open(r, u.repo, u.valid)
	if e != nil {
		writeError(w, r, e)
		return
	}
	repo := rs.repo // the canonical id, whatever case was asked
	_, c, p, e := h.splitRevPath(rs, u.rest)
	if e != nil {
		writeError(w, r, e)
		return
	}
	b := c.files[p]
	if b == nil {
		writeError(w, r, errEntryNotFound(c.id))
		return
	}
	key := repo.String() + "/" + p
	switch {
	case u.raw:
		h.serveRaw(w, r, c, b, key)
	case h.faults.take(faultRedirectForeign, classResolve, key):
		h.redirect(w, r, h.ForeignURL+"/files/"+b.etag(), c, b, false)
	case !b.lfs && (rs.gated || rs.private):
		// The Hub answers a restricted repo's regular files itself, with
		// 200 and no redirect, at whatever revision was asked for.
		h.serveDirect(w, r, c, b, key)
	case !b.lfs:
		loc := "/api/resolve-cache/" + repo.Type().Plural() + "/" + repo.ID() + "/" + c.id + "/" +
			escapePath(p) + "?etag=" + b.oid
		h.redirect(w, r, loc, nil, nil, false)
	case h.xet && strings.Contains(r.Header.Get("Accept"), "application/vnd.xet-fileinfo+json"):
		h.serveXetFileInfo(w, r, c, b)
	default:
		h.redirect(w, r, h.signer.url(h.cdnBase(), b.sha256, key, h.urlTTL), c, b, h.xet)
	}
}

// cdnBase is where presigned blob URLs point.
func (h *Hub) cdnBase() string {
	if h.cdnOnHub {
		return h.URL + "/cdn"
	}
	return h.CDNURL
}

// serveDirect answers a regular file at /resolve/ with its bytes and the
// metadata headers, without a redirect.
func (h *Hub) serveDirect(w http.ResponseWriter, r *http.Request, c *commitObj, b *blob, key string) {
	hd := w.Header()
	hd.Set("ETag", `"`+b.oid+`"`)
	hd.Set("X-Repo-Commit", c.id)
	hd.Set("Content-Type", contentType(key, false))
	h.serveBytes(w, r, content{data: b.data, key: key, class: classResolve})
}

// redirect sends a 302 to loc. With a commit and blob it carries the
// metadata the Hub puts only on an LFS file's redirect: X-Repo-Commit,
// X-Linked-Etag, X-Linked-Size and the git oid as ETag; with xet, the Xet
// signals too. Its Content-Length is that of its own small body.
func (h *Hub) redirect(w http.ResponseWriter, r *http.Request, loc string, c *commitObj, b *blob, xet bool) {
	hd := w.Header()
	hd.Set("Location", loc)
	if b != nil {
		hd.Set("X-Repo-Commit", c.id)
		hd.Set("X-Linked-Etag", `"`+b.etag()+`"`)
		hd.Set("X-Linked-Size", strconv.FormatInt(b.size(), 10))
		hd.Set("ETag", `"`+b.oid+`"`)
	}
	if xet && b != nil && b.lfs {
		route := xetTokenRoute(c)
		hd.Set("X-Xet-Hash", b.xetHash)
		hd.Set("X-Xet-Refresh-Route", route)
		hd.Set("Link", "<"+h.URL+route+`>; rel="xet-auth"`)
	}
	body := "Found. Redirecting to " + loc
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusFound)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(body))
	}
}

// xetTokenRoute is the path a Xet client would refresh its token at.
func xetTokenRoute(c *commitObj) string {
	return "/api/" + c.repo.Type().Plural() + "/" + c.repo.ID() + "/xet-read-token/" + c.id
}

// serveXetFileInfo answers the JS client's Xet probe (Accept:
// application/vnd.xet-fileinfo+json) as the Hub does, so tests can show the
// proxy never forwards that Accept header.
func (h *Hub) serveXetFileInfo(w http.ResponseWriter, r *http.Request, c *commitObj, b *blob) {
	h.stats.xet.Add(1)
	route := xetTokenRoute(c)
	hd := w.Header()
	hd.Set("X-Repo-Commit", c.id)
	hd.Set("X-Linked-Etag", `"`+b.sha256+`"`)
	hd.Set("X-Linked-Size", strconv.FormatInt(b.size(), 10))
	hd.Set("X-Xet-Hash", b.xetHash)
	hd.Set("Link", "<"+xetCASURL+"/v1/reconstructions/"+b.xetHash+`>; rel="xet-reconstruction-info", <`+
		h.URL+route+`>; rel="xet-auth"`)
	writeTypedJSON(w, r, http.StatusOK, "application/vnd.xet-fileinfo+json",
		map[string]string{"casUrl": xetCASURL, "hash": b.xetHash, "refreshUrl": h.URL + route})
}

// serveRaw answers /raw/: the bytes git stores, so an LFS file's pointer.
func (h *Hub) serveRaw(w http.ResponseWriter, r *http.Request, c *commitObj, b *blob, key string) {
	data := b.data
	if b.lfs {
		data = b.pointer
	}
	hd := w.Header()
	hd.Set("ETag", `"`+b.oid+`"`)
	hd.Set("X-Repo-Commit", c.id)
	hd.Set("Content-Type", contentType(key, b.lfs))
	h.serveBytes(w, r, content{data: data, key: key, class: classResolve})
}

// serveResolveCache answers the target of a regular file's relative redirect:
// /api/resolve-cache/{type}s/{repo}/{commit}/{path}.
func (h *Hub) serveResolveCache(w http.ResponseWriter, r *http.Request, rest string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, r, errMethod())
		return
	}
	plural, rest, _ := strings.Cut(rest, "/")
	t, ok := hub.ParseRepoType(plural)
	segs := strings.Split(rest, "/")
	if !ok || len(segs) < 3 {
		writeError(w, r, errNoRoute())
		return
	}
	// The id is one or two segments; the commit follows it.
	idLen := 1
	if len(segs) >= 4 && hub.IsCommit(segs[2]) {
		if repo, ok := parseRepo(t, segs[0]+"/"+segs[1]); ok && h.exists(repo) {
			idLen = 2
		}
	}
	asked, valid := parseRepo(t, strings.Join(segs[:idLen], "/"))
	rs, e := h.open(r, asked, valid)
	if e != nil {
		writeError(w, r, e)
		return
	}
	repo := rs.repo // the canonical id, whatever case was asked
	c, e := h.commit(rs, segs[idLen])
	if e != nil {
		writeError(w, r, e)
		return
	}
	p := unescape(strings.Join(segs[idLen+1:], "/"))
	b := c.files[p]
	if b == nil {
		writeError(w, r, errEntryNotFound(c.id))
		return
	}
	hd := w.Header()
	hd.Set("ETag", `"`+b.oid+`"`)
	hd.Set("X-Repo-Commit", c.id)
	hd.Set("Content-Type", contentType(p, false))
	h.serveBytes(w, r, content{data: b.data, key: repo.String() + "/" + p, class: classResolve})
}

func (h *Hub) exists(repo hub.Repo) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.repoLocked(repo) != nil
}

// contentType picks a Content-Type from the extension, without consulting
// the system's MIME tables so answers are the same everywhere.
func contentType(p string, pointer bool) string {
	if pointer {
		return "text/plain; charset=utf-8"
	}
	switch path.Ext(p) {
	case ".json":
		return "application/json"
	case ".txt", ".md", ".py", ".yaml", ".yml", ".gitattributes", "":
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

// xetCASURL is where Xet downloads would go; nothing listens there.
const xetCASURL = "https://cas-server.xethub.hf.co"
