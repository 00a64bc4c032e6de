package fetch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func TestAPIPassesStatusAndBodyThrough(t *testing.T) {
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Error-Code", "RepoNotFound")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":"Repository not found"}`)
	})
	c := newClient(t, up.URL, nil)
	resp, err := c.API(context.Background(), http.MethodGet, "/api/models/org/model/revision/main?expand=sha", callerAuth, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Error-Code") != "RepoNotFound" || string(body) != `{"error":"Repository not found"}` {
		t.Fatalf("got %d %v %q", resp.StatusCode, resp.Header, body)
	}
	h := up.Hits()[0]
	if h.URI != "/api/models/org/model/revision/main?expand=sha" || h.Header.Get("Authorization") != callerAuth {
		t.Fatalf("upstream saw %s with %v", h.URI, h.Header)
	}
}

func TestAPIForwardsOnlyAuthContentTypeAndBody(t *testing.T) {
	var gotBody atomic.Pointer[string]
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s := string(b)
		gotBody.Store(&s)
		io.WriteString(w, "[]")
	})
	c := newClient(t, up.URL+"/prefix", nil)
	client := http.Header{
		"Accept":          {"application/vnd.xet-fileinfo+json, */*"},
		"Accept-Encoding": {"gzip"},
		"Content-Type":    {"application/x-www-form-urlencoded"},
		"Cookie":          {"session=1"},
		"X-Custom":        {"1"},
	}
	body := []byte("paths=a&paths=b&expand=False")
	resp, err := c.API(context.Background(), http.MethodPost, "/api/models/org/model/paths-info/main", "", client, body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := up.Hits()[0]
	want := map[string]string{
		"Accept":          "*/*",
		"Accept-Encoding": "identity",
		"Content-Type":    "application/x-www-form-urlencoded",
		"Authorization":   "", // the proxy token never decides access
		"User-Agent":      "hubproxy",
		"Cookie":          "",
		"X-Custom":        "",
	}
	for k, v := range want {
		if got := h.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if h.Method != http.MethodPost || h.URI != "/prefix/api/models/org/model/paths-info/main" || *gotBody.Load() != string(body) {
		t.Fatalf("upstream saw %s %s with body %q", h.Method, h.URI, *gotBody.Load())
	}
}

func TestAPIRetriesOnlyIdempotentMethods(t *testing.T) {
	var n atomic.Int32
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "down")
			return
		}
		io.WriteString(w, "ok")
	})
	c := newClient(t, up.URL, nil)
	resp, err := c.API(context.Background(), http.MethodGet, "/api/models/org/model", "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "ok" || n.Load() != 3 {
		t.Fatalf("GET: %d %q after %d attempts", resp.StatusCode, b, n.Load())
	}

	n.Store(0)
	resp, err = c.API(context.Background(), http.MethodPost, "/api/models/org/model/paths-info/main", "", nil, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || string(b) != "down" || n.Load() != 1 {
		t.Fatalf("POST: %d %q after %d attempts, want the 503 as is after 1", resp.StatusCode, b, n.Load())
	}
}

func TestAPIRedirects(t *testing.T) {
	other := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/models/old/name":
			http.Redirect(w, r, "/api/models/new/name?"+r.URL.RawQuery, http.StatusMovedPermanently)
		case "/api/models/new/name":
			io.WriteString(w, `{"id":"new/name"}`)
		case "/api/models/away":
			http.Redirect(w, r, other.URL+"/elsewhere", http.StatusFound)
		}
	})
	c := newClient(t, up.URL, nil)
	resp, err := c.API(context.Background(), http.MethodGet, "/api/models/old/name?expand=sha", callerAuth, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != `{"id":"new/name"}` {
		t.Fatalf("relative redirect: %d %q", resp.StatusCode, b)
	}
	hits := up.Hits()
	if hits[1].URI != "/api/models/new/name?expand=sha" || hits[1].Header.Get("Authorization") != callerAuth {
		t.Fatalf("second hop %s with %v", hits[1].URI, hits[1].Header)
	}

	resp, err = c.API(context.Background(), http.MethodGet, "/api/models/away", callerAuth, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), other.URL) {
		t.Fatalf("absolute redirect: %d %q, want it returned as is", resp.StatusCode, resp.Header.Get("Location"))
	}
	if other.Count() != 0 {
		t.Fatal("an absolute redirect was followed")
	}
}

func TestAPIErrors(t *testing.T) {
	up := newServer(t, func(http.ResponseWriter, *http.Request) {})
	addr := up.URL
	up.Close()
	c := newClient(t, addr, nil)
	_, err := c.API(context.Background(), http.MethodGet, "/api/models/x", callerAuth, nil, nil)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	noSecrets(t, err)

	for _, p := range []string{"", "/models/x", "api/models", "//evil.example/api/x"} {
		if _, err := c.API(context.Background(), http.MethodGet, p, "", nil, nil); err == nil {
			t.Errorf("API(%q) succeeded", p)
		}
	}
	if _, err := c.API(context.Background(), http.MethodGet, "/api/x", "Bearer a\r\nX-Evil: 1", nil, nil); err == nil || strings.Contains(err.Error(), "Evil") {
		t.Errorf("a header-splitting Authorization gave %v", err)
	}
}
