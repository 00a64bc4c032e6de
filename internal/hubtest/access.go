package hubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Error codes the Hub sends in X-Error-Code (docs/hub-protocol.md §1c).
const (
	CodeRepoNotFound     = "RepoNotFound"
	CodeRevisionNotFound = "RevisionNotFound"
	CodeEntryNotFound    = "EntryNotFound"
	CodeGatedRepo        = "GatedRepo"
)

// hubError is an answer in the Hub's error format: a status, X-Error-Code,
// X-Error-Message and a JSON {"error": …} body.
type hubError struct {
	status int
	code   string // X-Error-Code; "" sends none
	msg    string
	commit string // X-Repo-Commit; set on EntryNotFound as the Hub does
}

func (e *hubError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.msg) }

func errRepoNotFound(authed bool) *hubError {
	// The Hub hides whether a repo exists from anonymous callers behind a
	// 401; an authenticated caller gets the honest 404.
	status := http.StatusUnauthorized
	if authed {
		status = http.StatusNotFound
	}
	return &hubError{status: status, code: CodeRepoNotFound, msg: "Repository not found"}
}

func (h *Hub) errGated(repo hub.Repo, authed bool) *hubError {
	if !authed {
		return &hubError{status: http.StatusUnauthorized, code: CodeGatedRepo, msg: fmt.Sprintf(
			"Access to %s %s is restricted. You must have access to it and be authenticated to access it. Please log in.",
			repo.Type(), repo.ID())}
	}
	return &hubError{status: http.StatusForbidden, code: CodeGatedRepo, msg: fmt.Sprintf(
		"Access to %s %s is restricted and you are not in the authorized list. Visit %s/%s to ask for access.",
		repo.Type(), repo.ID(), h.URL, repo)}
}

func errRevisionNotFound(rev string) *hubError {
	return &hubError{status: http.StatusNotFound, code: CodeRevisionNotFound, msg: "Invalid rev id: " + rev}
}

func errEntryNotFound(commit string) *hubError {
	return &hubError{status: http.StatusNotFound, code: CodeEntryNotFound, msg: "Entry not found", commit: commit}
}

func errNoRoute() *hubError {
	return &hubError{status: http.StatusNotFound, msg: "Sorry, we can't find the page you are looking for."}
}

func errMethod() *hubError {
	return &hubError{status: http.StatusMethodNotAllowed, msg: "Method not allowed"}
}

func errBadRequest(msg string) *hubError {
	return &hubError{status: http.StatusBadRequest, msg: msg}
}

// writeError sends e in the Hub's format.
func writeError(w http.ResponseWriter, r *http.Request, e *hubError) {
	hd := w.Header()
	if e.code != "" {
		hd.Set("X-Error-Code", e.code)
	}
	hd.Set("X-Error-Message", e.msg)
	if e.commit != "" {
		hd.Set("X-Repo-Commit", e.commit)
	}
	writeJSON(w, r, e.status, map[string]string{"error": e.msg})
}

// writeJSON sends v as the Hub sends JSON: with an exact Content-Length.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	writeTypedJSON(w, r, status, "application/json; charset=utf-8", v)
}

// writeTypedJSON is writeJSON with another Content-Type.
func writeTypedJSON(w http.ResponseWriter, r *http.Request, status int, ctype string, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only the package's own plain types are marshalled here.
		panic(fmt.Sprintf("hubtest: marshal %T: %v", v, err))
	}
	hd := w.Header()
	hd.Set("Content-Type", ctype)
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body) // a failed write means the client left
	}
}

// bearer returns the token of an "Authorization: Bearer <tok>" header, or "".
func bearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// parseRepo turns the escaped repo id of a URL into a Repo; ok is false for
// ids no repository can have.
func parseRepo(t hub.RepoType, escaped string) (hub.Repo, bool) {
	id, err := url.PathUnescape(escaped)
	if err != nil {
		return hub.Repo{}, false
	}
	repo, err := hub.ParseRepo(t, id)
	return repo, err == nil
}

// open checks that the caller of r may read repo's files (valid is false
// when the URL named no possible repo) and returns its state. Every route
// that serves file content goes through here, so gating is uniform.
func (h *Hub) open(r *http.Request, repo hub.Repo, valid bool) (*repoState, *hubError) {
	return h.check(r, repo, valid, true)
}

// openMeta is open for the metadata routes (repo info, tree, paths-info).
// The Hub serves a gated repo's metadata to anyone, anonymous callers
// included: only its files are behind the gate (docs/hub-protocol.md §9).
// A private repo stays invisible to strangers here as everywhere.
func (h *Hub) openMeta(r *http.Request, repo hub.Repo, valid bool) (*repoState, *hubError) {
	return h.check(r, repo, valid, false)
}

// check is the Hub's order of checks: the repo exists and the caller may
// see it (private), then, for file content only, the gate. Revision and
// path come after, so a refused caller never learns whether either exists.
// repo may be in any case (docs/hub-protocol.md §9 rule 6): the rules are
// the canonical repo's, and callers answer with rs.repo, its canonical id,
// never the casing that was asked.
func (h *Hub) check(r *http.Request, repo hub.Repo, valid, content bool) (*repoState, *hubError) {
	tok := bearer(r)
	authed := tok != ""
	h.mu.RLock()
	defer h.mu.RUnlock()
	var rs *repoState
	if valid {
		rs = h.repoLocked(repo)
	}
	approved := rs != nil && authed && !h.revoked[tok] && rs.approved[tok]
	switch {
	case rs == nil, rs.private && !approved:
		return nil, errRepoNotFound(authed)
	case content && rs.gated && !approved:
		return nil, h.errGated(rs.repo, authed)
	}
	return rs, nil
}

// commit resolves rev in rs.
func (h *Hub) commit(rs *repoState, rev string) (*commitObj, *hubError) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if c := rs.commitFor(rev); c != nil {
		return c, nil
	}
	return nil, errRevisionNotFound(rev)
}

// splitRevPath splits the escaped "{rev}/{path}" tail of a file or tree URL.
// The revision is normally one segment ("main", or "refs%2Fpr%2F1" as Python
// sends it), but some clients send "refs/pr/1" unescaped, so when the first
// segment is not a revision the shortest run of segments that is one wins.
// Segments are unescaped only after the split (docs/hub-protocol.md §0).
func (h *Hub) splitRevPath(rs *repoState, escaped string) (rev string, c *commitObj, path string, e *hubError) {
	segs := strings.Split(escaped, "/")
	rev = unescape(segs[0])
	n := 1
	h.mu.RLock()
	c = rs.commitFor(rev)
	if c == nil && !strings.Contains(rev, "/") {
		for k := 2; k <= len(segs); k++ {
			cand := unescape(strings.Join(segs[:k], "/"))
			if cc := rs.commitFor(cand); cc != nil {
				rev, c, n = cand, cc, k
				break
			}
		}
	}
	h.mu.RUnlock()
	if c == nil {
		return rev, nil, "", errRevisionNotFound(rev)
	}
	return rev, c, unescape(strings.Join(segs[n:], "/")), nil
}

// unescape decodes %XX escapes, leaving malformed input as it came.
func unescape(s string) string {
	if v, err := url.PathUnescape(s); err == nil {
		return v
	}
	return s
}
