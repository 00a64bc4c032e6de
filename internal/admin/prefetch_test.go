package admin_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/spectest"
)

// prefetch posts body to /cache/prefetch and returns the status, the error
// code, and the NDJSON events of a 200.
func prefetch(t *testing.T, url, body, auth string) (int, string, []admin.PrefetchEvent) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/cache/prefetch", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, resp.Header.Get("X-Error-Code"), nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("prefetch Content-Type %q", ct)
	}
	var evs []admin.PrefetchEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev admin.PrefetchEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return resp.StatusCode, "", evs
}

// TestPrefetchFillsTheCacheAsTheCaller: the prefetch selects as
// allow_patterns do, fills each file once, reports hits the second time,
// and is answered for the caller's own access.
func TestPrefetchFillsTheCacheAsTheCaller(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	files := append(hubtest.ShardedModel("model", 2, 2, 64, 64),
		hubtest.File{Path: "original/params.json", Data: []byte(`{"dim":8}`)},
		hubtest.File{Path: "original/sub/consolidated.00.pth", Data: hubtest.RandomBytes(3, 3000)})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: files})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Dataset, ID: "org/private", Private: true, ApprovedTokens: []string{"hf_good"},
		Files: []hubtest.File{{Path: "data.csv", Data: []byte("a,b\n")}}})
	adm := httptest.NewServer(e.Admin)
	defer adm.Close()

	code, _, evs := prefetch(t, adm.URL, `{"repo":"org/model","include":["original/"],"exclude":["*.pth"]}`, "")
	if code != 200 || len(evs) != 3 || evs[0].Event != "start" || evs[0].Files != 1 || evs[2].Event != "done" {
		t.Fatalf("prefetch original/ minus *.pth: %d %+v", code, evs)
	}
	if f := evs[1]; f.Event != "file" || f.Path != "original/params.json" || f.Cache != "fetched" || f.Bytes != 9 || f.Size != 9 || f.Error != "" {
		t.Errorf("file event %+v", f)
	}
	before := e.Hub.Counters().BodyBytes
	code, _, evs = prefetch(t, adm.URL, `{"repo":"org/model","include":["original/*"]}`, "")
	if code != 200 || len(evs) != 4 {
		t.Fatalf("prefetch original/*: %d %+v", code, evs)
	}
	done := evs[len(evs)-1]
	if done.Event != "done" || done.Files != 2 || done.Hits != 1 || done.Failed != 0 || done.Bytes != 9+3000 || done.Commit == "" {
		t.Errorf("done %+v", done)
	}
	if got := e.Hub.Counters().BodyBytes - before; got != 3000 {
		t.Errorf("second prefetch fetched %d body bytes upstream, want only the new file's 3000", got)
	}
	// The files are the public listener's hits now.
	resp, _ := e.Do(http.MethodGet, "/org/model/resolve/main/original/sub/consolidated.00.pth")
	if resp.StatusCode != 200 || resp.Header.Get("X-Hubproxy-Cache") != "hit" {
		t.Errorf("GET after the prefetch: %d, X-Hubproxy-Cache %q", resp.StatusCode, resp.Header.Get("X-Hubproxy-Cache"))
	}

	// Every line is what the contract says.
	spec := spectest.Load(t)
	schema := spec.Schema(t, "PrefetchEvent")
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		var v any
		json.Unmarshal(b, &v)
		spec.Conforms(t, schema, v, "PrefetchEvent")
	}

	// Access is the caller's: refused without the token, as a GET would be.
	if code, errCode, _ := prefetch(t, adm.URL, `{"repo":"org/private","repo_type":"dataset"}`, ""); code != 401 || errCode != "RepoNotFound" {
		t.Errorf("prefetch of a private repo without a token: %d %s", code, errCode)
	}
	if code, _, evs := prefetch(t, adm.URL, `{"repo":"org/private","repo_type":"dataset"}`, "Bearer hf_good"); code != 200 || len(evs) != 3 || evs[1].Cache != "fetched" {
		t.Errorf("prefetch of a private repo with its token: %d %+v", code, evs)
	}

	for body, want := range map[string]int{
		`{"repo":"org/model","include":["*.gguf"]}`:             400, // nothing selected
		`{"repo":"org/model","files":["absent.json"]}`:          400,
		`{"repo":"org/model","files":["a"],"include":["*"]}`:    400,
		`{"repo":"org/model","bogus":1}`:                        400,
		`{"repo":"org/model","repo_type":"bucket"}`:             400,
		`{"repo":"org/absent"}`:                                 401,
		`{"repo":"org/model","revision":"nobranch"}`:            404,
		`{"repo":"org/model","files":["original/params.json"]}`: 200,
	} {
		if code, errCode, _ := prefetch(t, adm.URL, body, ""); code != want {
			t.Errorf("prefetch %s: %d %s, want %d", body, code, errCode, want)
		}
	}
}
