package dirhub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree creates files (path → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		name := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func gitSHA1(s string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(s))
	h.Write([]byte(s))
	return hex.EncodeToString(h.Sum(nil))
}

// newTestHub serves dir over HTTP for the length of the test.
func newTestHub(t *testing.T, dir string, opts Options) (*Hub, *httptest.Server) {
	t.Helper()
	h, err := New(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.Close()
	})
	return h, srv
}

// do sends a request and returns the response with its body read.
func do(t *testing.T, method, url string, hdr map[string]string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// wantError checks a hub error answer.
func wantError(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	if resp.StatusCode != status || resp.Header.Get("X-Error-Code") != code {
		t.Errorf("%s %s: got %d %q, want %d %q", resp.Request.Method, resp.Request.URL.Path,
			resp.StatusCode, resp.Header.Get("X-Error-Code"), status, code)
	}
}

type entry struct {
	Type string `json:"type"`
	OID  string `json:"oid"`
	Size int64  `json:"size"`
	Path string `json:"path"`
	LFS  *struct {
		OID         string `json:"oid"`
		Size        int64  `json:"size"`
		PointerSize int    `json:"pointerSize"`
	} `json:"lfs"`
	LastCommit *struct {
		ID string `json:"id"`
	} `json:"lastCommit"`
}

func decodeEntries(t *testing.T, body string) []entry {
	t.Helper()
	var es []entry
	if err := json.Unmarshal([]byte(body), &es); err != nil {
		t.Fatalf("decoding %q: %v", body, err)
	}
	return es
}

func paths(es []entry) string {
	var ps []string
	for _, e := range es {
		ps = append(ps, e.Type[:1]+":"+e.Path)
	}
	return strings.Join(ps, " ")
}
