package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

var model = hub.MustRepo(hub.Model, "acme/model")

// fixture is the standard repo: a small safetensors file (LFS by suffix), a
// forced-regular binary, a JSON config and a nested text file.
type fixture struct {
	commit  string
	weights []byte
	config  []byte
	notes   []byte
	big     []byte // 1 MiB + 1, forced regular
}

func addFixture(t *testing.T, h *Hub) fixture {
	t.Helper()
	f := fixture{
		weights: Safetensors([]Tensor{{Name: "w", DType: "F32", Shape: []int64{64, 64}}}, nil),
		config:  []byte(`{"model_type":"fake"}`),
		notes:   []byte("hello notes\n"),
		big:     RandomBytes(7, lfsThreshold+1),
	}
	f.commit = h.AddRepo(RepoSpec{ID: model.ID(), Files: []File{
		{Path: "model.safetensors", Data: f.weights},
		{Path: "config.json", Data: f.config},
		{Path: "sub/dir/notes.txt", Data: f.notes},
		{Path: "big.dat", Data: f.big, LFS: new(false)},
	}})
	return f
}

// client never follows redirects, so tests see each hop.
var client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends one request; hdr is "Name: value" pairs.
func do(t *testing.T, method, url string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range hdr {
		k, v, _ := strings.Cut(kv, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp, body
}

func wantStatus(t *testing.T, resp *http.Response, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d (X-Error-Code %q, %q)", resp.Request.Method, resp.Request.URL,
			resp.StatusCode, want, resp.Header.Get("X-Error-Code"), resp.Header.Get("X-Error-Message"))
	}
}

func wantHeader(t *testing.T, resp *http.Response, name, want string) {
	t.Helper()
	if got := resp.Header.Get(name); got != want {
		t.Errorf("%s %s: %s = %q, want %q", resp.Request.Method, resp.Request.URL, name, got, want)
	}
}

// Independent reference computations, so the tests do not trust objects.go.
func refGitSHA1(p []byte) string {
	s := sha1.Sum(append([]byte(fmt.Sprintf("blob %d\x00", len(p))), p...))
	return hex.EncodeToString(s[:])
}

func refSHA256(p []byte) string {
	s := sha256.Sum256(p)
	return hex.EncodeToString(s[:])
}

func refPointer(p []byte) []byte {
	return []byte("version https://git-lfs.github.com/spec/v1\noid sha256:" + refSHA256(p) + "\nsize " + fmt.Sprint(len(p)) + "\n")
}

func hubRepo(id string) hub.Repo { return hub.MustRepo(hub.Model, id) }
