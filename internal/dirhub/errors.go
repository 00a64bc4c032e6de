package dirhub

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// The hub's X-Error-Code values that dirhub answers with.
const (
	CodeRepoNotFound     = "RepoNotFound"
	CodeRevisionNotFound = "RevisionNotFound"
	CodeEntryNotFound    = "EntryNotFound"
)

// hubError is an answer in the hub's error vocabulary (docs/hub-protocol.md §1c):
// status, X-Error-Code, X-Error-Message, a JSON {"error": …} body, and
// X-Repo-Commit on a missing file so clients can cache the miss.
type hubError struct {
	status int
	code   string
	msg    string
	commit string
}

func (e *hubError) Error() string { return e.msg }

// errRepoNotFound is a 404, or a 401 to anonymous callers (writeError
// decides), as the Hub hides whether a repo exists from them.
func errRepoNotFound() *hubError {
	return &hubError{status: http.StatusNotFound, code: CodeRepoNotFound, msg: "Repository not found"}
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

// errInternal reports a local failure (an unreadable file, hashing cut
// short) without its text, which names local paths.
func errInternal() *hubError {
	return &hubError{status: http.StatusInternalServerError, msg: "Internal error reading the repository"}
}

func writeError(w http.ResponseWriter, r *http.Request, e *hubError) {
	hd := w.Header()
	status := e.status
	if e.code == CodeRepoNotFound && r.Header.Get("Authorization") == "" {
		status = http.StatusUnauthorized
	}
	if e.code != "" {
		hd.Set("X-Error-Code", e.code)
	}
	hd.Set("X-Error-Message", e.msg)
	if e.commit != "" {
		hd.Set("X-Repo-Commit", e.commit)
	}
	writeJSON(w, r, status, map[string]string{"error": e.msg})
}

// writeJSON sends v with an exact Content-Length, as the Hub does.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}
