package dirhub

import (
	"net/http"
	"strconv"
)

// serveFile answers HEAD and GET on /resolve/ and /raw/ with the file itself
// (200, never a redirect) and the headers hubproxy's upstream client and the
// hub clients read (docs/hub-protocol.md §1a): X-Repo-Commit, a quoted ETag, and
// for LFS-like files X-Linked-Etag and X-Linked-Size. http.ServeContent
// provides Content-Length, Accept-Ranges, 206/416 and If-None-Match.
func (h *Hub) serveFile(w http.ResponseWriter, r *http.Request, rt route) {
	s, herr := h.open(rt.repo, rt.rev)
	if herr != nil {
		writeError(w, r, herr)
		return
	}
	fe, ok := s.file(rt.path)
	if !ok {
		writeError(w, r, errEntryNotFound(s.commit))
		return
	}
	f, err := h.root.Open(fe.rel)
	if err != nil {
		h.log.Warn("dirhub: opening", "path", fe.rel, "err", err)
		writeError(w, r, errInternal())
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		writeError(w, r, errInternal())
		return
	}
	// Describe the file as opened: it may have changed since the listing,
	// and the ETag must name these bytes.
	// (An HF cache blob keeps its name as ETag: hubproxy verifies it.)
	fe.size, fe.mtime = info.Size(), info.ModTime()
	m, err := h.meta(r.Context(), fe)
	if err != nil {
		h.writeMetaError(w, r, err)
		return
	}
	hd := w.Header()
	hd.Set("X-Repo-Commit", s.commit)
	hd.Set("ETag", strconv.Quote(m.etag))
	if m.lfs {
		hd.Set("X-Linked-Etag", strconv.Quote(m.etag))
		hd.Set("X-Linked-Size", strconv.FormatInt(fe.size, 10))
	}
	hd.Set("Accept-Ranges", "bytes")
	if hd.Get("Content-Type") == "" {
		// No sniffing: the bytes are served as they are.
		hd.Set("Content-Type", "application/octet-stream")
	}
	http.ServeContent(w, r, "", fe.mtime, f)
}
