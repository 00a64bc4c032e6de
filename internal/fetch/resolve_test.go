package fetch

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

var gpt2 = hub.MustRepo(hub.Model, "org/model")

const sha256ETag = "5f4ba0a5c2a5f0b2b4d5e1b8a3d9f0e7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a291"

func TestResolveFollowsRelativeRedirects(t *testing.T) {
	const cachePath = "/api/resolve-cache/models/org/model/" + testCommit + "/config.json"
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/org/model/resolve/main/config.json":
			// A renamed-repo style hop, then the hub's resolve-cache hop.
			w.Header().Set("X-Repo-Commit", "ffffffffffffffffffffffffffffffffffffffff")
			w.Header().Set("Location", "/org/model/resolve/main/config2.json")
			w.WriteHeader(http.StatusMovedPermanently)
		case "/org/model/resolve/main/config2.json":
			w.Header().Set("Location", cachePath+"?etag=abc&sig=x")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case cachePath:
			w.Header().Set("X-Repo-Commit", testCommit)
			w.Header().Set("ETag", `W/"0d3ef2a5f5a4b0c1d2e3f4a5b6c7d8e9f0a1b2c3"`)
			w.Header().Set("Content-Length", "1234")
			w.WriteHeader(http.StatusOK)
		default:
			http.NotFound(w, r)
		}
	})
	c := newClient(t, up.URL, nil)
	m, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: gpt2, Rev: "main", Path: "config.json"})
	if err != nil {
		t.Fatal(err)
	}
	want := FileMeta{
		Commit:      testCommit,
		ETag:        "0d3ef2a5f5a4b0c1d2e3f4a5b6c7d8e9f0a1b2c3",
		Size:        1234,
		DownloadURL: up.URL + cachePath,
		Linked:      false,
	}
	if m != want {
		t.Fatalf("meta = %+v\nwant   %+v", m, want)
	}
	hits := up.Hits()
	if len(hits) != 3 {
		t.Fatalf("upstream saw %d requests, want 3", len(hits))
	}
	for _, h := range hits {
		if h.Method != http.MethodHead {
			t.Errorf("%s %s, want HEAD", h.Method, h.URI)
		}
		// Resolve decides access, so the proxy's own token is never
		// used for an anonymous caller.
		if got := h.Header.Get("Authorization"); got != "" {
			t.Errorf("%s: Authorization = %q, want none for an anonymous caller", h.URI, got)
		}
		if h.Header.Get("Accept") != "*/*" || h.Header.Get("Accept-Encoding") != "identity" || h.Header.Get("User-Agent") != "hubproxy" {
			t.Errorf("%s: headers %v", h.URI, h.Header)
		}
	}
	if hits[2].URI != cachePath {
		t.Errorf("third hop %q: the relative Location's query must be dropped, as huggingface_hub does", hits[2].URI)
	}
}

func TestResolveAbsoluteRedirectIsTheMetadata(t *testing.T) {
	cdn := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	loc := cdn.URL + "/xet-bridge/" + sha256ETag + "?sig=SIGNATURE&expires=1"
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Repo-Commit", testCommit)
		w.Header().Set("X-Linked-Etag", `"`+sha256ETag+`"`)
		w.Header().Set("X-Linked-Size", "987654321")
		w.Header().Set("ETag", `"0000000000000000000000000000000000000000"`)
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusFound)
	})
	c := newClient(t, up.URL, nil)
	m, err := c.Resolve(context.Background(), callerAuth, hub.FileRef{Repo: gpt2, Rev: "main", Path: "model.safetensors"})
	if err != nil {
		t.Fatal(err)
	}
	want := FileMeta{Commit: testCommit, ETag: sha256ETag, Size: 987654321, DownloadURL: loc, Linked: true}
	if m != want {
		t.Fatalf("meta = %+v\nwant   %+v", m, want)
	}
	if n := cdn.Count(); n != 0 {
		t.Fatalf("the CDN saw %d requests; Resolve must never contact it", n)
	}
	if got := up.Hits()[0].Header.Get("Authorization"); got != callerAuth {
		t.Fatalf("Authorization = %q, want the caller's own value", got)
	}
}

func TestResolveEscapesRevisionAndPath(t *testing.T) {
	up := newServer(t, headHandler(map[string]string{"X-Repo-Commit": testCommit, "ETag": `"e"`, "Content-Length": "1"}))
	c := newClient(t, up.URL+"/mirror/", func(o *Options) { o.Token = "" })
	ds := hub.MustRepo(hub.Dataset, "org/data")
	m, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: ds, Rev: "refs/pr/1", Path: "dir/a b#c.txt"})
	if err != nil {
		t.Fatal(err)
	}
	const want = "/mirror/datasets/org/data/resolve/refs%2Fpr%2F1/dir/a%20b%23c.txt"
	if got := up.Hits()[0].URI; got != want {
		t.Fatalf("request URI = %q, want %q", got, want)
	}
	// The bytes are fetched at the commit, never at the ref (which may move).
	if pinned := "/mirror/datasets/org/data/resolve/" + testCommit + "/dir/a%20b%23c.txt"; m.DownloadURL != up.URL+pinned {
		t.Fatalf("DownloadURL = %q, want %q", m.DownloadURL, up.URL+pinned)
	}
	if h := up.Hits()[0].Header.Get("Authorization"); h != "" {
		t.Fatalf("no token and no caller auth, yet Authorization = %q", h)
	}
}

func TestResolveRejectsInvalidInput(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:1", nil)
	ctx := context.Background()
	for _, tc := range []struct {
		repo      hub.Repo
		rev, path string
	}{
		{hub.Repo{}, "main", "a"},
		{gpt2, "../main", "a"},
		{gpt2, "main", "../a"},
		{gpt2, "main", "/etc/passwd"},
	} {
		_, err := c.Resolve(ctx, "", hub.FileRef{Repo: tc.repo, Rev: tc.rev, Path: tc.path})
		var ie *hub.InvalidError
		if !errors.As(err, &ie) {
			t.Errorf("Resolve(%v, %q, %q) = %v, want *hub.InvalidError", tc.repo, tc.rev, tc.path, err)
		}
	}
}

func TestResolveProtocolErrors(t *testing.T) {
	ok := map[string]string{"X-Repo-Commit": testCommit, "ETag": `"e"`, "Content-Length": "5"}
	without := func(k string) map[string]string {
		m := map[string]string{}
		for kk, v := range ok {
			if kk != k {
				m[kk] = v
			}
		}
		return m
	}
	with := func(k, v string) map[string]string {
		m := without(k)
		m[k] = v
		return m
	}
	redirect := func(code int, h map[string]string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			for k, v := range h {
				w.Header().Set(k, v)
			}
			w.WriteHeader(code)
		}
	}
	cases := []struct {
		name   string
		h      http.HandlerFunc
		reason string
	}{
		{"no commit", headHandler(without("X-Repo-Commit")), "X-Repo-Commit"},
		{"short commit", headHandler(with("X-Repo-Commit", "abc123")), "X-Repo-Commit"},
		{"no etag", headHandler(without("ETag")), "ETag"},
		{"no size", headHandler(without("Content-Length")), "Content-Length"},
		{"bad linked size", headHandler(with("X-Linked-Size", "-5")), "X-Linked-Size"},
		{"absolute redirect without linked size", redirect(http.StatusFound, map[string]string{
			"X-Repo-Commit": testCommit, "X-Linked-Etag": `"e"`, "Location": "https://cdn.example/x", "Content-Length": "0",
		}), "X-Linked-Size"},
		{"redirect without Location", redirect(http.StatusFound, ok), "Location"},
		{"unparsable Location", redirect(http.StatusFound, map[string]string{"Location": "http://[::1"}), "does not parse"},
		{"non-http Location", redirect(http.StatusFound, map[string]string{"Location": "file:///etc/passwd"}), "http(s)"},
		{"redirect loop", redirect(http.StatusTemporaryRedirect, map[string]string{"Location": "/org/model/resolve/main/f"}), "redirects"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := newServer(t, tc.h)
			c := newClient(t, up.URL, func(o *Options) { o.MaxRedirects = 3 })
			_, err := c.Resolve(context.Background(), callerAuth, hub.FileRef{Repo: gpt2, Rev: "main", Path: "f"})
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ProtocolError", err)
			}
			if !strings.Contains(pe.Reason, tc.reason) {
				t.Errorf("reason %q does not mention %q", pe.Reason, tc.reason)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("a protocol error must not allow an offline fallback")
			}
			noSecrets(t, err)
		})
	}
}

func TestResolveStatusErrors(t *testing.T) {
	cases := []struct {
		code      int
		errorCode string
		message   string
		commit    string
	}{
		{http.StatusUnauthorized, "RepoNotFound", "Repository not found", ""},
		{http.StatusForbidden, "GatedRepo", "Access to model org/model is restricted and you are not in the authorized list.", ""},
		{http.StatusNotFound, "EntryNotFound", "Entry not found", testCommit},
		{http.StatusNotFound, "RevisionNotFound", "Invalid rev id: nope", ""},
	}
	for _, tc := range cases {
		t.Run(tc.errorCode, func(t *testing.T) {
			up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Error-Code", tc.errorCode)
				w.Header().Set("X-Error-Message", tc.message)
				if tc.commit != "" {
					w.Header().Set("X-Repo-Commit", tc.commit)
				}
				w.WriteHeader(tc.code)
			})
			c := newClient(t, up.URL, nil)
			_, err := c.Resolve(context.Background(), callerAuth, hub.FileRef{Repo: gpt2, Rev: "main", Path: "missing.bin"})
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *StatusError", err)
			}
			want := StatusError{Code: tc.code, ErrorCode: tc.errorCode, Message: tc.message, RepoCommit: tc.commit,
				URL: up.URL + "/org/model/resolve/main/missing.bin"}
			if *se != want {
				t.Fatalf("got  %+v\nwant %+v", *se, want)
			}
			if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrExpired) {
				t.Errorf("a %d must not match ErrUnavailable or ErrExpired", tc.code)
			}
			if up.Count() != 1 {
				t.Errorf("a %d was retried: %d requests", tc.code, up.Count())
			}
			noSecrets(t, err)
		})
	}
}

func TestResolveRetries5xxThenSucceeds(t *testing.T) {
	var n atomic.Int32
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		headHandler(map[string]string{"X-Repo-Commit": testCommit, "ETag": `"e"`, "Content-Length": "7"})(w, r)
	})
	c := newClient(t, up.URL, nil)
	m, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: gpt2, Rev: "main", Path: "f"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Size != 7 || up.Count() != 3 {
		t.Fatalf("size %d after %d requests, want 7 after 3", m.Size, up.Count())
	}
}

func TestResolvePersistent5xxIsUnavailable(t *testing.T) {
	for _, code := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusTooManyRequests} {
		up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
		})
		c := newClient(t, up.URL, func(o *Options) { o.Retries = 2 })
		_, err := c.Resolve(context.Background(), callerAuth, hub.FileRef{Repo: gpt2, Rev: "main", Path: "f"})
		var se *StatusError
		if !errors.As(err, &se) || se.Code != code {
			t.Fatalf("%d: err = %v, want *StatusError", code, err)
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%d: not ErrUnavailable", code)
		}
		if up.Count() != 3 {
			t.Errorf("%d: %d requests, want 1 + 2 retries", code, up.Count())
		}
		noSecrets(t, err)
	}
}

func TestResolveNetworkErrorIsUnavailable(t *testing.T) {
	up := newServer(t, func(http.ResponseWriter, *http.Request) {})
	addr := up.URL
	up.Close() // nothing listens there now
	c := newClient(t, addr, nil)
	_, err := c.Resolve(context.Background(), callerAuth, hub.FileRef{Repo: gpt2, Rev: "main", Path: "f"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	noSecrets(t, err)
}

func TestResolveMetadataTimeoutIsUnavailable(t *testing.T) {
	release := make(chan struct{})
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	c := newClient(t, up.URL, func(o *Options) { o.MetadataTimeout = 50 * time.Millisecond })
	_, err := c.Resolve(context.Background(), "", hub.FileRef{Repo: gpt2, Rev: "main", Path: "f"})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrUnavailable and DeadlineExceeded", err)
	}
}

func TestResolveCallerCancelIsNotUnavailable(t *testing.T) {
	arrived := make(chan struct{}, 1)
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	c := newClient(t, up.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := c.Resolve(ctx, "", hub.FileRef{Repo: gpt2, Rev: "main", Path: "f"})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want context.Canceled and not ErrUnavailable", err)
	}
	if up.Count() != 1 {
		t.Fatalf("a cancelled call was retried: %d requests", up.Count())
	}
}

func TestResolveScrubsEchoedCredentials(t *testing.T) {
	// A hostile or buggy upstream echoes the credential back in its error.
	up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Error-Code", "Bad "+r.Header.Get("Authorization"))
		w.Header().Set("X-Error-Message", "bad token: "+r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusUnauthorized)
	})
	for _, auth := range []string{callerAuth} {
		c := newClient(t, up.URL, nil)
		_, err := c.Resolve(context.Background(), auth, hub.FileRef{Repo: gpt2, Rev: "main", Path: "f"})
		var se *StatusError
		if !errors.As(err, &se) {
			t.Fatalf("err = %v", err)
		}
		noSecrets(t, err)
		if !strings.Contains(se.Message, "[REDACTED]") {
			t.Errorf("message %q: the echoed credential was not replaced", se.Message)
		}
	}
}
