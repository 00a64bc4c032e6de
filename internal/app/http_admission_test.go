package app_test

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
	e.Hub.AddRepo(hubtest.RepoSpec{ID: "org/model", Files: files})
	e.Hub.AddRepo(hubtest.RepoSpec{ID: "org/secret", Files: files})
	e.Hub.AddRepo(hubtest.RepoSpec{ID: "other/model", Files: files})
	e.Hub.ResetCounters()
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
		code, _ := statusOf(e, http.MethodGet, tc.path, tc.auth)
		resp, _ := e.Do(http.MethodHead, tc.path, "Authorization", tc.auth)
		if code != tc.status || resp.Header.Get("X-Error-Code") != tc.code {
			t.Errorf("%s by %q: %d %q, want %d %q", tc.path, tc.auth, code, resp.Header.Get("X-Error-Code"), tc.status, tc.code)
		}
	}
	// Nothing refused reached upstream.
	for _, rec := range e.Hub.Requests() {
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

// hostileEnv is a proxy denying harness/tiny-gpt2 and the legacy gpt2 in
// front of a hub holding harness/tiny-gpt2 and harness/other; it returns
// their commits.
func hostileEnv(t *testing.T) (e *env, denied, other string) {
	e = newEnv(t, hubtest.Options{}, func(c *app.Config) {
		c.DenyRepos = []string{"harness/tiny-gpt2", "gpt2"}
	})
	files := []hubtest.File{{Path: "config.json", Data: []byte("{}")}}
	denied = e.Hub.AddRepo(hubtest.RepoSpec{ID: "harness/tiny-gpt2", Files: files})
	other = e.Hub.AddRepo(hubtest.RepoSpec{ID: "harness/other", Files: files})
	e.Hub.ResetCounters()
	return e, denied, other
}

// Security review: with deny-repos set, /api/ paths whose repo hubproxy
// read differently from the Hub (resolve-cache, dot segments in any
// encoding, encoded slashes, other casings, paths naming no repo) were
// relayed upstream. Each is now refused, 400 where the path itself is
// ambiguous and 403 where it names a denied repo or none that can be
// checked, and none reaches upstream.
func TestAdmissionRefusesHostileAPIPaths(t *testing.T) {
	e, c, _ := hostileEnv(t)
	const bad, refused = http.StatusBadRequest, http.StatusForbidden
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/api/resolve-cache/models/harness/tiny-gpt2/" + c + "/config.json", refused},
		{"HEAD", "/api/resolve-cache/models/harness/tiny-gpt2/" + c + "/config.json", refused},
		{"GET", "/api/resolve-cache/models/Harness/Tiny-GPT2/" + c + "/config.json", refused},
		{"GET", "/api/resolve-cache/models/harness/tiny-gpt2/main/config.json", refused},
		{"GET", "/api/resolve-cache/models/gpt2/" + c + "/config.json", refused},
		{"GET", "/api/resolve-cache/models/harness%2Ftiny-gpt2/" + c + "/config.json", bad},
		{"GET", "/api/../harness/tiny-gpt2/resolve/main/config.json", bad},
		{"HEAD", "/api/../harness/tiny-gpt2/resolve/main/config.json", bad},
		{"POST", "/api/../api/models/harness/tiny-gpt2/paths-info/main", bad},
		{"GET", "/api/%2e%2e/harness/tiny-gpt2/resolve/main/config.json", bad},
		{"GET", "/api/%2E%2E/harness/tiny-gpt2/resolve/main/config.json", bad},
		{"GET", "/api/%2e%2E/harness/tiny-gpt2/resolve/main/config.json", bad},
		{"GET", "/api/%252e%252e/harness/tiny-gpt2/resolve/main/config.json", bad},
		{"GET", "/api/models/harness/other/%2e%2e/tiny-gpt2", bad},
		{"GET", "/api/models/harness/other/discussions/..%2F..%2F..%2Fharness%2Ftiny-gpt2", bad},
		{"GET", "/api/models/harness/./tiny-gpt2", bad},
		{"GET", "/api/models/harness%2Ftiny-gpt2/refs", bad},
		{"HEAD", "/api/models/harness%2Ftiny-gpt2/refs", bad},
		{"GET", "/api/models/harness%2ftiny-gpt2", bad},
		{"GET", "/api/models/harness%252Ftiny-gpt2/refs", bad},
		{"GET", "/api/models/harness%5Ctiny-gpt2/refs", bad},
		{"GET", "/api/models/Harness/Tiny-GPT2", refused},
		{"HEAD", "/api/models/HARNESS/tiny-gpt2/refs", refused},
		{"GET", "/api/models/harness/TINY-gpt2/revision/main", refused},
		{"GET", "/api/models/Harness/Tiny-GPT2/tree/main", refused},
		{"POST", "/api/models/Harness/Tiny-GPT2/paths-info/main", refused},
		{"GET", "/api/models/harness/tiny-gpt2/", refused},
		{"GET", "/api/models/harness/tiny-gpt2/revision/main/", refused},
		{"GET", "/api/models/harness/tiny-gpt2/tree/main/", refused},
		{"GET", "/api/models//harness/tiny-gpt2", refused},
		{"GET", "/api/Models/harness/tiny-gpt2", refused},
		{"GET", "/api/models/gpt2/refs", refused},
		{"GET", "/api/models/GPT2/discussions/1", refused},
		{"POST", "/api/repos/create", refused},
		{"POST", "/api/models", refused},
		{"GET", "/api/", refused},
		{"GET", "/api/models/", refused},
		// The file, tensor and GPU routes fold case the same way.
		{"GET", "/Harness/Tiny-GPT2/resolve/main/config.json", refused},
		{"HEAD", "/HARNESS/TINY-GPT2/raw/main/config.json", refused},
		{"GET", "/models/Harness/Tiny-GPT2/tensors", refused},
		{"GET", "/GPT2/resolve/main/config.json", refused},
		{"GET", "/harness%2Ftiny-gpt2/resolve/main/config.json", bad},
	} {
		code := map[int]string{bad: "BadRequest", refused: "RepoNotAllowed"}[tc.status]
		resp, body := e.Do(tc.method, tc.path)
		if resp.StatusCode != tc.status || resp.Header.Get("X-Error-Code") != code {
			t.Errorf("%s %s: %d %q %s, want %d %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("X-Error-Code"), body, tc.status, code)
		}
	}
	for _, rec := range e.Hub.Requests() {
		t.Errorf("a refused request reached upstream: %s %s", rec.Method, rec.Path)
	}
	if n := e.Hub.Counters().Requests; n != 0 {
		t.Errorf("upstream saw %d requests, want 0", n)
	}
}

// The same proxy still relays allowed repos, revisions and tree paths with
// encoded slashes, and the routes that name no repo.
func TestAdmissionLetsAllowedAndRepoLessRoutesThrough(t *testing.T) {
	e, _, other := hostileEnv(t)
	for _, tc := range []struct {
		method, path string
		status       int // 0: whatever upstream answers
	}{
		{"GET", "/api/models/harness/other", 200},
		{"GET", "/api/models/harness/other/revision/main", 200},
		{"GET", "/api/models/harness/other/tree/main", 200},
		{"GET", "/api/resolve-cache/models/harness/other/" + other + "/config.json", 200},
		{"HEAD", "/api/resolve-cache/models/harness/other/" + other + "/config.json", 200},
		{"GET", "/harness/other/resolve/main/config.json", 200},
		{"GET", "/api/models/harness/other/revision/refs%2Fpr%2F1", 0},
		{"GET", "/api/models/harness/other/tree/main/sub%2Fdir", 0},
		{"GET", "/api/models/harness/other/discussions", 0},
		{"GET", "/api/whoami-v2", 0},
		{"GET", "/api/models?search=tiny", 0},
		{"HEAD", "/api/datasets?author=harness", 0},
		{"GET", "/api/spaces", 0},
	} {
		before := e.Hub.Counters().Requests
		resp, body := e.Do(tc.method, tc.path)
		if tc.status != 0 && resp.StatusCode != tc.status || resp.Header.Get("X-Error-Code") == "RepoNotAllowed" ||
			resp.Header.Get("X-Error-Code") == "BadRequest" {
			t.Errorf("%s %s: %d %q %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("X-Error-Code"), body)
		}
		if e.Hub.Counters().Requests == before {
			t.Errorf("%s %s did not reach upstream", tc.method, tc.path)
		}
	}
}

// The Hub resolves repo ids case-insensitively, so patterns match in any
// case: an allow pattern admits every casing of its repos (and a pattern
// written in capitals admits lower-case ids), on every route.
func TestAdmissionAllowFoldsCase(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, func(c *app.Config) { c.AllowRepos = []string{"HARNESS/*"} })
	files := []hubtest.File{{Path: "config.json", Data: []byte("{}")}}
	e.Hub.AddRepo(hubtest.RepoSpec{ID: "harness/tiny-gpt2", Files: files})
	e.Hub.AddRepo(hubtest.RepoSpec{ID: "other/model", Files: files})
	for _, p := range []string{
		"/harness/tiny-gpt2/resolve/main/config.json",
		"/Harness/Tiny-GPT2/resolve/main/config.json",
		"/api/models/harness/tiny-gpt2",
		"/api/models/hArNeSs/tiny-gpt2/revision/main",
		"/models/Harness/tiny-gpt2/tensors",
	} {
		before := e.Hub.Counters().Requests
		if resp, body := e.Do(http.MethodGet, p); resp.Header.Get("X-Error-Code") == "RepoNotAllowed" {
			t.Errorf("%s: refused: %s", p, body)
		}
		if e.Hub.Counters().Requests == before {
			t.Errorf("%s did not reach upstream", p)
		}
	}
	for _, p := range []string{"/Other/Model/resolve/main/config.json", "/api/models/OTHER/model", "/api/resolve-cache/models/harness/tiny-gpt2/main/config.json"} {
		if resp, _ := e.Do(http.MethodGet, p); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", p, resp.StatusCode)
		}
	}
}
