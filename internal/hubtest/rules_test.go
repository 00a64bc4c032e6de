package hubtest

import (
	"encoding/json"
	"net/http"
	"net/url"
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
	t.Run("6 repo ids match in any case", func(t *testing.T) {
		// The canonical id has capitals, so a fold in either direction
		// shows: asked in any case, it is the one repo, answered by its
		// canonical id, under its own access rules.
		const canon = "Harness/Tiny-GPT2"
		commit := h.AddRepo(RepoSpec{ID: canon, Files: files})
		get := func(tok, p string) (*http.Response, []byte) {
			t.Helper()
			return do(t, "GET", h.URL+p, auth(tok)...)
		}
		ref := map[string][]byte{}
		metaRoutes := []string{"", "/revision/main", "/tree/main"}
		for _, m := range metaRoutes {
			resp, body := get("", "/api/models/"+canon+m)
			wantStatus(t, resp, 200)
			ref[m] = body
		}
		for _, asked := range []string{"harness/tiny-gpt2", "HARNESS/TINY-GPT2", "hArNeSs/tiny-Gpt2"} {
			for _, m := range metaRoutes {
				resp, body := get("", "/api/models/"+asked+m)
				wantStatus(t, resp, 200)
				if string(body) != string(ref[m]) {
					t.Errorf("%s%s answered %s, want as for %s: %s", asked, m, body, canon, ref[m])
				}
			}
			resp, body := get("", "/api/models/"+asked)
			wantStatus(t, resp, 200)
			var info map[string]any
			if err := json.Unmarshal(body, &info); err != nil || info["id"] != canon || info["sha"] != commit || info["author"] != "Harness" {
				t.Errorf("%s: info %s, want id %s and sha %s", asked, body, canon, commit)
			}
			resp, _ = do(t, "POST", h.URL+"/api/models/"+asked+"/paths-info/main", "Content-Type: application/x-www-form-urlencoded")
			wantStatus(t, resp, 200)
			resp, _ = get("", "/api/models/"+asked+"/xet-read-token/main")
			wantStatus(t, resp, 200)
			// A regular file redirects to the canonical resolve-cache URL,
			// an LFS file to the CDN under the canonical id.
			resp, _ = get("", "/"+asked+"/resolve/main/config.json")
			wantStatus(t, resp, 302)
			loc := resp.Header.Get("Location")
			if !strings.HasPrefix(loc, "/api/resolve-cache/models/"+canon+"/"+commit+"/config.json?") {
				t.Errorf("%s: config.json redirects to %q, want the canonical resolve-cache URL", asked, loc)
			}
			resp, body = get("", loc)
			wantStatus(t, resp, 200)
			if string(body) != "{}" {
				t.Errorf("%s: config.json via %s = %q", asked, loc, body)
			}
			resp, body = get("", "/api/resolve-cache/models/"+asked+"/"+commit+"/config.json")
			wantStatus(t, resp, 200)
			if string(body) != "{}" {
				t.Errorf("%s: resolve-cache config.json = %q", asked, body)
			}
			resp, body = get("", "/"+asked+"/raw/main/config.json")
			wantStatus(t, resp, 200)
			if string(body) != "{}" {
				t.Errorf("%s: raw config.json = %q", asked, body)
			}
			resp, _ = get("", "/"+asked+"/resolve/main/model.safetensors")
			wantStatus(t, resp, 302)
			wantHeader(t, resp, "X-Repo-Commit", commit)
			loc = resp.Header.Get("Location")
			if !strings.Contains(loc, "X-Hub-File="+url.QueryEscape(canon+"/model.safetensors")) {
				t.Errorf("%s: model.safetensors redirects to %q, want the canonical file", asked, loc)
			}
			resp, body = do(t, "GET", loc)
			wantStatus(t, resp, 200)
			if string(body) != "weights" {
				t.Errorf("%s: model.safetensors from the CDN = %q", asked, body)
			}
		}
		// The fold is within a type: no dataset has the model's id.
		resp, _ := get("", "/api/datasets/harness/tiny-gpt2")
		wantStatus(t, resp, 401)
		wantHeader(t, resp, "X-Error-Code", CodeRepoNotFound)
		// Counters and faults name the canonical file whatever case was asked.
		h.ResetCounters()
		h.SetFaults(Faults{CorruptBytes: Fault{N: 1}, CorruptPath: canon + "/config.json"})
		resp, body := get("", "/harness/tiny-gpt2/raw/main/config.json")
		h.SetFaults(Faults{})
		wantStatus(t, resp, 200)
		if string(body) == "{}" {
			t.Errorf("CorruptPath %s/config.json did not hit the file asked as harness/tiny-gpt2", canon)
		}
		if got := h.Counters().BytesByPath; got[canon+"/config.json"] != 2 || len(got) != 1 {
			t.Errorf("BytesByPath = %v, want only %s/config.json: 2", got, canon)
		}

		// A gated repo in another case: metadata for anyone, content only
		// for the approved token, refusals naming the canonical repo.
		gatedCommit, _ := h.Stat(hubRepo("acme/gated"), "main", "config.json")
		for _, asked := range []string{"ACME/Gated", "acme/GATED"} {
			resp, body := get("", "/api/models/"+asked)
			wantStatus(t, resp, 200)
			var info map[string]any
			if err := json.Unmarshal(body, &info); err != nil || info["id"] != "acme/gated" || info["gated"] != "manual" {
				t.Errorf("%s: info %s, want id acme/gated, gated manual", asked, body)
			}
			content := []string{"/" + asked + "/resolve/main/model.safetensors", "/" + asked + "/resolve/main/config.json",
				"/" + asked + "/raw/main/config.json", "/api/models/" + asked + "/xet-read-token/main",
				"/api/resolve-cache/models/" + asked + "/" + gatedCommit.Commit + "/config.json"}
			for _, c := range []struct {
				tok    string
				status int
			}{{"", 401}, {"hf_stranger", 403}} {
				for _, p := range content {
					resp, _ := get(c.tok, p)
					wantStatus(t, resp, c.status)
					wantHeader(t, resp, "X-Error-Code", CodeGatedRepo)
					if msg := resp.Header.Get("X-Error-Message"); !strings.Contains(msg, " acme/gated ") {
						t.Errorf("%s: refusal %q does not name acme/gated", p, msg)
					}
				}
			}
			for _, p := range content[1:] {
				resp, _ := get("hf_ok", p)
				wantStatus(t, resp, 200)
			}
			resp, _ = get("hf_ok", content[0])
			wantStatus(t, resp, 302)
		}

		// A private repo in another case is as invisible to strangers as in
		// its own, on every route, and as visible to its approved token.
		privCommit, _ := h.Stat(hubRepo("acme/private"), "main", "config.json")
		for _, asked := range []string{"ACME/Private", "acme/PRIVATE"} {
			routes := []string{"/api/models/" + asked, "/api/models/" + asked + "/revision/main", "/api/models/" + asked + "/tree/main",
				"/" + asked + "/resolve/main/config.json", "/" + asked + "/raw/main/config.json",
				"/api/models/" + asked + "/xet-read-token/main",
				"/api/resolve-cache/models/" + asked + "/" + privCommit.Commit + "/config.json"}
			for _, c := range []struct {
				tok    string
				status int
			}{{"", 401}, {"hf_stranger", 404}} {
				for _, p := range routes {
					resp, _ := get(c.tok, p)
					wantStatus(t, resp, c.status)
					wantHeader(t, resp, "X-Error-Code", CodeRepoNotFound)
				}
			}
			for _, p := range routes {
				resp, _ := get("hf_ok", p)
				wantStatus(t, resp, 200)
			}
			resp, body := get("hf_ok", "/api/models/"+asked)
			wantStatus(t, resp, 200)
			var info map[string]any
			if err := json.Unmarshal(body, &info); err != nil || info["id"] != "acme/private" || info["private"] != true {
				t.Errorf("%s: info %s, want id acme/private, private true", asked, body)
			}
			h.RevokeToken("hf_ok")
			resp, _ = get("hf_ok", "/"+asked+"/resolve/main/config.json")
			h.GrantToken("hf_ok")
			wantStatus(t, resp, 404)
			wantHeader(t, resp, "X-Error-Code", CodeRepoNotFound)
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
