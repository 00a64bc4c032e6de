package hubtest

import (
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// TestGatingMatrix checks every route that reads a repo against every kind of
// caller, for a gated and a private repo.
func TestGatingMatrix(t *testing.T) {
	h := NewT(t, Options{})
	files := []File{{Path: "model.safetensors", Data: []byte("weights")}, {Path: "config.json", Data: []byte("{}")}}
	gated := h.AddRepo(RepoSpec{ID: "acme/gated", Files: files, Gated: true, ApprovedTokens: []string{"hf_ok", "hf_revoked"}})
	private := h.AddRepo(RepoSpec{ID: "acme/private", Files: files, Private: true, ApprovedTokens: []string{"hf_ok", "hf_revoked"}})
	h.RevokeToken("hf_revoked")

	routes := []struct {
		name, method, path string
		ok                 int
		meta               bool // metadata: a gated repo's is public (docs/hub-protocol.md §9)
	}{
		{"resolve LFS", "HEAD", "/{id}/resolve/main/model.safetensors", 302, false},
		// Restricted repos' regular files are answered directly, at the
		// revision asked for, as the Hub does.
		{"resolve regular", "GET", "/{id}/resolve/main/config.json", 200, false},
		{"raw", "HEAD", "/{id}/raw/main/config.json", 200, false},
		{"resolve-cache", "GET", "/api/resolve-cache/models/{id}/{commit}/config.json", 200, false},
		{"info", "GET", "/api/models/{id}", 200, true},
		{"revision", "GET", "/api/models/{id}/revision/main", 200, true},
		{"tree", "GET", "/api/models/{id}/tree/main", 200, true},
		{"paths-info", "POST", "/api/models/{id}/paths-info/main", 200, true},
		{"xet-read-token", "GET", "/api/models/{id}/xet-read-token/main", 200, false},
	}
	callers := []struct {
		name, token           string
		gatedStatus, privStat int // 0: the route's success status
		gatedCode, privCode   string
	}{
		{"anonymous", "", 401, 401, CodeGatedRepo, CodeRepoNotFound},
		{"unapproved", "hf_other", 403, 404, CodeGatedRepo, CodeRepoNotFound},
		{"revoked", "hf_revoked", 403, 404, CodeGatedRepo, CodeRepoNotFound},
		{"approved", "hf_ok", 0, 0, "", ""},
	}
	for _, rt := range routes {
		for _, c := range callers {
			for _, repo := range []struct {
				id, commit, code string
				status           int
			}{
				{"acme/gated", gated, c.gatedCode, c.gatedStatus},
				{"acme/private", private, c.privCode, c.privStat},
			} {
				t.Run(rt.name+"/"+c.name+"/"+repo.id, func(t *testing.T) {
					p := strings.ReplaceAll(strings.ReplaceAll(rt.path, "{id}", repo.id), "{commit}", repo.commit)
					var hdr []string
					if c.token != "" {
						hdr = append(hdr, "Authorization: Bearer "+c.token)
					}
					resp, _ := do(t, rt.method, h.URL+p, hdr...)
					want, code := repo.status, repo.code
					if rt.meta && repo.id == "acme/gated" {
						want, code = 0, ""
					}
					if want == 0 {
						want = rt.ok
					}
					wantStatus(t, resp, want)
					wantHeader(t, resp, "X-Error-Code", code)
				})
			}
		}
	}
}

func TestGatedMessages(t *testing.T) {
	h := NewT(t, Options{})
	h.AddRepo(RepoSpec{Type: hub.Dataset, ID: "acme/g", Gated: true, Files: []File{{Path: "a", Data: []byte("a")}}})
	resp, _ := do(t, "HEAD", h.URL+"/datasets/acme/g/resolve/main/a")
	wantHeader(t, resp, "X-Error-Message",
		"Access to dataset acme/g is restricted. You must have access to it and be authenticated to access it. Please log in.")
	resp, _ = do(t, "HEAD", h.URL+"/datasets/acme/g/resolve/main/a", "Authorization: Bearer hf_x")
	if m := resp.Header.Get("X-Error-Message"); !strings.Contains(m, "not in the authorized list") {
		t.Errorf("403 message %q", m)
	}
	// Approving later opens the repo; revoking closes it again.
	h.ApproveToken(hub.MustRepo(hub.Dataset, "acme/g"), "hf_x")
	resp, _ = do(t, "GET", h.URL+"/datasets/acme/g/raw/main/a", "Authorization: Bearer hf_x")
	wantStatus(t, resp, 200)
	h.RevokeToken("hf_x")
	resp, _ = do(t, "GET", h.URL+"/datasets/acme/g/raw/main/a", "Authorization: Bearer hf_x")
	wantStatus(t, resp, 403)
}

// A repo's owner can gate it, make it private or open it again at any time;
// callers see the change on their next request.
func TestSetAccessAndGrantToken(t *testing.T) {
	h := NewT(t, Options{})
	repo := hub.MustRepo(hub.Model, "acme/turns")
	h.AddRepo(RepoSpec{ID: repo.ID(), Files: []File{{Path: "config.json", Data: []byte("{}")}}, ApprovedTokens: []string{"hf_ok"}})
	url := h.URL + "/acme/turns/resolve/main/config.json"
	resp, _ := do(t, "HEAD", url)
	wantStatus(t, resp, 302)
	h.SetAccess(repo, true, false)
	resp, _ = do(t, "HEAD", url)
	wantStatus(t, resp, 401)
	wantHeader(t, resp, "X-Error-Code", CodeGatedRepo)
	resp, _ = do(t, "HEAD", url, "Authorization: Bearer hf_ok")
	wantStatus(t, resp, 200)
	h.RevokeToken("hf_ok")
	resp, _ = do(t, "HEAD", url, "Authorization: Bearer hf_ok")
	wantStatus(t, resp, 403)
	h.GrantToken("hf_ok")
	resp, _ = do(t, "HEAD", url, "Authorization: Bearer hf_ok")
	wantStatus(t, resp, 200)
	h.SetAccess(repo, false, true)
	resp, _ = do(t, "HEAD", url)
	wantStatus(t, resp, 401)
	wantHeader(t, resp, "X-Error-Code", CodeRepoNotFound)
	h.SetAccess(repo, false, false)
	resp, _ = do(t, "HEAD", url)
	wantStatus(t, resp, 302)
}
