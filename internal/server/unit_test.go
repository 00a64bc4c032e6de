package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/repofs"
	"github.com/hubproxy/hubproxy/internal/resolver"
	"github.com/hubproxy/hubproxy/internal/server"
)

// These tests build the server alone, on fakes of what it asks (server.Files),
// so they say what the HTTP layer does with an answer: no upstream, no cache,
// no app. What the whole proxy does is tested in internal/app (http_*_test.go).

// fakeFiles answers Stat with meta or err, and fails Open with openErr; it
// records the calls it gets.
type fakeFiles struct {
	meta    resolver.Meta
	err     error
	openErr error

	mu    sync.Mutex
	calls []string // "stat auth repo rev path" / "open …"
}

func (f *fakeFiles) record(op string, c hub.Caller, ref hub.FileRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, strings.Join([]string{op, c.Auth(), ref.Repo.String(), ref.Rev, ref.Path}, " "))
}

func (f *fakeFiles) Stat(_ context.Context, c hub.Caller, ref hub.FileRef) (resolver.Meta, error) {
	f.record("stat", c, ref)
	return f.meta, f.err
}

func (f *fakeFiles) Open(_ context.Context, c hub.Caller, ref hub.FileRef) (*repofs.File, error) {
	f.record("open", c, ref)
	if f.openErr != nil {
		return nil, f.openErr
	}
	return nil, errors.New("fakeFiles: Open has nothing to serve")
}

func (f *fakeFiles) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// send serves one request with a server on files and returns the answer.
func send(t *testing.T, files server.Files, method, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	srv := server.New(server.Options{Files: files})
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	resp := rec.Result()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

const (
	unitCommit = "0123456789abcdef0123456789abcdef01234567"
	unitETag   = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
)

// A HEAD is answered from the file's metadata alone, with the headers
// huggingface_hub reads, and never opens the file.
func TestUnitHeadAnswersFromMetadata(t *testing.T) {
	files := &fakeFiles{meta: resolver.Meta{FileMeta: fetch.FileMeta{
		Commit: unitCommit, ETag: unitETag, Size: 3 << 20, Linked: true,
	}}}
	resp, body := send(t, files, http.MethodHead, "/org/model/resolve/main/model.safetensors", "Authorization", "Bearer tok")
	if resp.StatusCode != http.StatusOK || body != "" {
		t.Fatalf("HEAD: %d %q, want 200 and no body", resp.StatusCode, body)
	}
	for k, v := range map[string]string{
		"X-Repo-Commit":  unitCommit,
		"Etag":           `"` + unitETag + `"`,
		"X-Linked-Etag":  `"` + unitETag + `"`,
		"X-Linked-Size":  "3145728",
		"Content-Length": "3145728",
		"Accept-Ranges":  "bytes",
	} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("HEAD %s = %q, want %q", k, got, v)
		}
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.Contains(cd, `filename="model.safetensors"`) {
		t.Errorf("Content-Disposition = %q", cd)
	}
	if got, want := files.seen(), []string{"stat Bearer tok org/model main model.safetensors"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("calls = %q, want %q (Stat with the caller's credentials, no Open)", got, want)
	}

	// A matching If-None-Match is a 304, still from metadata alone.
	resp, _ = send(t, files, http.MethodHead, "/org/model/resolve/main/model.safetensors", "If-None-Match", `"`+unitETag+`"`)
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("HEAD If-None-Match: %d, want 304", resp.StatusCode)
	}
}

// A typed "no such file" from below becomes the hub's 404: status, error
// code, message and the commit clients cache the miss under, for HEAD (from
// Stat) and GET (from Open) alike.
func TestUnitTypedNotFoundIs404(t *testing.T) {
	notFound := &fetch.StatusError{Code: http.StatusNotFound, ErrorCode: "EntryNotFound",
		Message: "Entry not found", RepoCommit: unitCommit}
	files := &fakeFiles{err: notFound, openErr: notFound}
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		resp, body := send(t, files, method, "/org/model/resolve/main/missing.bin")
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: status %d, want 404", method, resp.StatusCode)
		}
		for k, v := range map[string]string{
			"X-Error-Code":    "EntryNotFound",
			"X-Error-Message": "Entry not found",
			"X-Repo-Commit":   unitCommit,
		} {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s %s = %q, want %q", method, k, got, v)
			}
		}
		for _, k := range []string{"Etag", "X-Linked-Etag", "X-Linked-Size"} {
			if got := resp.Header.Get(k); got != "" {
				t.Errorf("%s: a 404 carries %s %q", method, k, got)
			}
		}
		if method == http.MethodHead {
			if body != "" {
				t.Errorf("HEAD 404 has a body: %q", body)
			}
			continue
		}
		var msg map[string]string
		if err := json.Unmarshal([]byte(body), &msg); err != nil || msg["error"] != "Entry not found" {
			t.Errorf("GET 404 body %q (%v), want {\"error\": \"Entry not found\"}", body, err)
		}
	}
	if got := files.seen(); len(got) != 2 || !strings.HasPrefix(got[0], "stat ") || !strings.HasPrefix(got[1], "open ") {
		t.Errorf("calls = %q, want a Stat for the HEAD and an Open for the GET", got)
	}
}

// A method a route does not serve is a 405 in the server's error shape, with
// Allow, decided before anything is asked of the files.
func TestUnitMethodNotAllowed(t *testing.T) {
	files := &fakeFiles{}
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodPost, "/org/model/resolve/main/config.json", "GET, HEAD"},
		{http.MethodDelete, "/datasets/org/data/raw/main/train.csv", "GET, HEAD"},
		{http.MethodPut, "/models/org/model/tensors", "GET, HEAD"}, // Options has no Tensors: refused first
	} {
		resp, body := send(t, files, tc.method, tc.path)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: status %d, want 405", tc.method, tc.path, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
		if got := resp.Header.Get("X-Error-Code"); got != "MethodNotAllowed" {
			t.Errorf("%s %s: X-Error-Code %q", tc.method, tc.path, got)
		}
		var msg map[string]string
		if json.Unmarshal([]byte(body), &msg) != nil || msg["error"] == "" {
			t.Errorf("%s %s: body %q is not the JSON error shape", tc.method, tc.path, body)
		}
	}
	if got := files.seen(); len(got) != 0 {
		t.Errorf("a refused method reached the files: %q", got)
	}
}

// A request whose Via names this process is one of its own upstream
// requests come back: 508 LoopDetected, before anything is asked of the
// files. Another proxy's Via passes.
func TestUnitLoopIsRefusedFirst(t *testing.T) {
	files := &fakeFiles{err: &fetch.StatusError{Code: http.StatusNotFound, ErrorCode: "EntryNotFound"}}
	serve := func(via string) *http.Response {
		srv := server.New(server.Options{Files: files, Instance: "hubproxy-0123"})
		req := httptest.NewRequest(http.MethodHead, "/org/model/resolve/main/config.json", nil)
		req.Header.Set("Via", via)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec.Result()
	}
	resp := serve("1.1 corp-proxy, 1.1 hubproxy-0123")
	if resp.StatusCode != http.StatusLoopDetected || resp.Header.Get("X-Error-Code") != "LoopDetected" ||
		!strings.Contains(resp.Header.Get("X-Error-Message"), "upstream") {
		t.Errorf("own Via: %d %q %q, want 508 LoopDetected naming the upstream setting",
			resp.StatusCode, resp.Header.Get("X-Error-Code"), resp.Header.Get("X-Error-Message"))
	}
	if got := files.seen(); len(got) != 0 {
		t.Errorf("a looped request reached the files: %q", got)
	}
	if resp := serve("1.1 hubproxy-4567"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another proxy's Via: %d, want the files' 404", resp.StatusCode)
	}
}
