package hubtest

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestHubAccessRules checks the fake against docs/hub-protocol.md §9, rule
// by rule: what huggingface.co serves to whom. A fake stricter than the Hub
// hides leaks in the proxy (a proxy that mistakes public metadata for a
// grant passes every test against a fake that gates metadata), so each rule
// is checked in the direction that matters: what the Hub *does* serve.
func TestHubAccessRules(t *testing.T) {
	h := NewT(t, Options{})
	files := []File{{Path: "model.safetensors", Data: []byte("weights")}, {Path: "config.json", Data: []byte("{}")}}
	h.AddRepo(RepoSpec{ID: "acme/gated", Files: files, Gated: true, ApprovedTokens: []string{"hf_ok"}})
	h.AddRepo(RepoSpec{ID: "acme/private", Files: files, Private: true, ApprovedTokens: []string{"hf_ok"}})
	auth := func(tok string) []string {
		if tok == "" {
			return nil
		}
		return []string{"Authorization: Bearer " + tok}
	}

	t.Run("1 gated metadata is public", func(t *testing.T) {
		for _, tok := range []string{"", "hf_stranger", "hf_ok"} {
			resp, body := do(t, "GET", h.URL+"/api/models/acme/gated", auth(tok)...)
			wantStatus(t, resp, 200)
			var info map[string]any
			if err := json.Unmarshal(body, &info); err != nil || info["gated"] != "manual" || info["private"] != false {
				t.Fatalf("caller %q: info %s, want gated manual and private false", tok, body)
			}
			for _, p := range []string{"/api/models/acme/gated/tree/main", "/api/models/acme/gated/revision/main"} {
				resp, _ := do(t, "GET", h.URL+p, auth(tok)...)
				wantStatus(t, resp, 200)
			}
			resp, _ = do(t, "POST", h.URL+"/api/models/acme/gated/paths-info/main",
				append(auth(tok), "Content-Type: application/x-www-form-urlencoded")...)
			wantStatus(t, resp, 200)
		}
	})
	t.Run("2 gated content needs the grant", func(t *testing.T) {
		for _, c := range []struct {
			tok    string
			status int
		}{{"", 401}, {"hf_stranger", 403}} {
			for _, p := range []string{"/acme/gated/resolve/main/model.safetensors", "/acme/gated/raw/main/config.json",
				"/api/models/acme/gated/xet-read-token/main"} {
				resp, _ := do(t, "GET", h.URL+p, auth(c.tok)...)
				wantStatus(t, resp, c.status)
				wantHeader(t, resp, "X-Error-Code", CodeGatedRepo)
			}
		}
		resp, _ := do(t, "GET", h.URL+"/acme/gated/resolve/main/config.json", auth("hf_ok")...)
		wantStatus(t, resp, 200)
	})
	t.Run("3 private repos are invisible to strangers", func(t *testing.T) {
		for _, c := range []struct {
			tok    string
			status int
		}{{"", 401}, {"hf_stranger", 404}} {
			for _, repo := range []string{"acme/private", "acme/does-not-exist"} {
				for _, p := range []string{"/api/models/" + repo, "/api/models/" + repo + "/tree/main", "/" + repo + "/resolve/main/config.json"} {
					resp, _ := do(t, "GET", h.URL+p, auth(c.tok)...)
					wantStatus(t, resp, c.status)
					wantHeader(t, resp, "X-Error-Code", CodeRepoNotFound)
				}
			}
		}
	})
	t.Run("4 repo before revision before path", func(t *testing.T) {
		// Refused callers learn nothing of revisions or paths.
		for _, p := range []string{"/acme/gated/resolve/no-such-rev/config.json", "/acme/gated/resolve/main/no-such-file"} {
			resp, _ := do(t, "GET", h.URL+p)
			wantStatus(t, resp, 401)
			wantHeader(t, resp, "X-Error-Code", CodeGatedRepo)
		}
		resp, _ := do(t, "GET", h.URL+"/acme/private/resolve/no-such-rev/config.json", auth("hf_stranger")...)
		wantHeader(t, resp, "X-Error-Code", CodeRepoNotFound)
		// A granted caller does.
		resp, _ = do(t, "GET", h.URL+"/acme/gated/resolve/no-such-rev/config.json", auth("hf_ok")...)
		wantStatus(t, resp, 404)
		wantHeader(t, resp, "X-Error-Code", CodeRevisionNotFound)
		resp, _ = do(t, "GET", h.URL+"/acme/gated/resolve/main/no-such-file", auth("hf_ok")...)
		wantStatus(t, resp, 404)
		wantHeader(t, resp, "X-Error-Code", CodeEntryNotFound)
		// Metadata of a gated repo answers revisions to anyone: it says
		// nothing of the files.
		resp, _ = do(t, "GET", h.URL+"/api/models/acme/gated/revision/no-such-rev")
		wantStatus(t, resp, 404)
		wantHeader(t, resp, "X-Error-Code", CodeRevisionNotFound)
	})
	t.Run("5 expand projects", func(t *testing.T) {
		resp, body := do(t, "GET", h.URL+"/api/models/acme/gated?expand=private")
		wantStatus(t, resp, 200)
		var info map[string]any
		if err := json.Unmarshal(body, &info); err != nil {
			t.Fatal(err)
		}
		if _, ok := info["gated"]; ok || info["private"] != false || info["id"] != "acme/gated" || info["_id"] == nil || len(info) != 3 {
			t.Fatalf("expand=private answered %s, want only _id, id and private", body)
		}
		resp, body = do(t, "GET", h.URL+"/api/models/acme/gated?expand=gated&expand=sha")
		wantStatus(t, resp, 200)
		info = nil
		if err := json.Unmarshal(body, &info); err != nil {
			t.Fatal(err)
		}
		if _, ok := info["private"]; ok || info["gated"] != "manual" || info["sha"] == nil || len(info) != 4 {
			t.Fatalf("expand=gated&expand=sha answered %s", body)
		}
		if strings.Contains(string(body), "siblings") {
			t.Fatalf("siblings not asked for but listed: %s", body)
		}
	})
}

// The front page answers anyone, and an outage takes it down with every
// other route: a proxy's liveness probe sees what its clients see.
func TestFrontPageAnswersAndFailsWithTheHub(t *testing.T) {
	h := NewT(t, Options{})
	resp, _ := do(t, "HEAD", h.URL+"/")
	wantStatus(t, resp, 200)
	h.SetFaults(Faults{Status5xx: Fault{N: 1}})
	resp, _ = do(t, "HEAD", h.URL+"/")
	wantStatus(t, resp, 503)
	h.SetFaults(Faults{Status5xx: Fault{N: 1, Target: TargetAPI}})
	resp, _ = do(t, "HEAD", h.URL+"/")
	wantStatus(t, resp, 200)
}
