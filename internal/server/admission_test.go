package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// Admission narrows who may use the proxy and for which repos, before
// anything reaches upstream or the disk; probes stay open.
func TestAdmission(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("# teams\nhf_team_a\n\nhf_team_b\n"), 0o600)
	e := newEnv(t, hubtest.Options{}, func(c *app.Config) {
		c.AllowRepos = []string{"org/*", "datasets/org/*"}
		c.DenyRepos = []string{"org/secret"}
		c.ClientTokensFile = tokens
	})
	files := []hubtest.File{{Path: "config.json", Data: []byte("{}")}}
	e.hub.AddRepo(hubtest.RepoSpec{ID: "org/model", Files: files})
	e.hub.AddRepo(hubtest.RepoSpec{ID: "org/secret", Files: files})
	e.hub.AddRepo(hubtest.RepoSpec{ID: "other/model", Files: files})
	e.hub.ResetCounters()
	for _, tc := range []struct {
		path, auth string
		status     int
		code       string
	}{
		{"/org/model/resolve/main/config.json", "", 401, "TokenRequired"},
		{"/org/model/resolve/main/config.json", "Bearer hf_stranger", 401, "TokenRequired"},
		{"/org/model/resolve/main/config.json", "Bearer hf_team_b", 200, ""},
		{"/org/secret/resolve/main/config.json", "Bearer hf_team_a", 403, "RepoNotAllowed"},
		{"/other/model/resolve/main/config.json", "Bearer hf_team_a", 403, "RepoNotAllowed"},
		{"/api/models/other/model", "Bearer hf_team_a", 403, "RepoNotAllowed"},
		{"/api/models/other/model/discussions", "Bearer hf_team_a", 403, "RepoNotAllowed"},
		{"/models/other/model/tensors", "Bearer hf_team_a", 403, "RepoNotAllowed"},
		{"/api/models/org/model", "Bearer hf_team_a", 200, ""},
		{"/healthz", "", 200, ""},
		{"/metrics", "", 200, ""},
	} {
		code, _ := e.status(http.MethodGet, tc.path, tc.auth)
		resp, _ := e.do(http.MethodHead, tc.path, "Authorization", tc.auth)
		if code != tc.status || resp.Header.Get("X-Error-Code") != tc.code {
			t.Errorf("%s by %q: %d %q, want %d %q", tc.path, tc.auth, code, resp.Header.Get("X-Error-Code"), tc.status, tc.code)
		}
	}
	// Nothing refused reached upstream.
	for _, rec := range e.hub.Requests() {
		if rec.Path == "/org/secret/resolve/main/config.json" || rec.Path == "/api/models/other/model" {
			t.Errorf("a refused request reached upstream: %s", rec.Path)
		}
	}
}

// A bad pattern or an empty token file stops the proxy at start.
func TestAdmissionConfigErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(empty, []byte("# nobody\n"), 0o600)
	for name, cfg := range map[string]app.Config{
		"bad pattern": {AllowRepos: []string{"org/[x"}},
		"empty file":  {ClientTokensFile: empty},
		"no file":     {ClientTokensFile: filepath.Join(t.TempDir(), "missing")},
	} {
		cfg.Upstream, cfg.CacheDir = "http://127.0.0.1:1", t.TempDir()
		if h, err := app.Build(cfg, nil); err == nil {
			h.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}
