package app_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// A branch that moves while a file is being filled never mixes two commits:
// every byte of an answer is the file of the commit that answer names. Here
// the hub serves a gated repo's regular file itself (200, no redirect), so
// the download URL is on the hub and must be pinned to the commit.
func TestMovingBranchNeverMixesCommits(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	const tok = "hf_granted"
	a := hubtest.RandomBytes(11, 3_000_000)
	b := hubtest.RandomBytes(12, 3_000_000)
	noLFS := new(bool)
	commitA := e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Gated: true, ApprovedTokens: []string{tok},
		Files: []hubtest.File{{Path: "data.bin", Data: a, LFS: noLFS}}})
	auth := "Bearer " + tok

	resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/data.bin", "Authorization", auth, "Range", "bytes=0-99999")
	if resp.StatusCode != 206 || !bytes.Equal(body, a[:100000]) {
		t.Fatalf("first range: %d", resp.StatusCode)
	}
	commitB := e.Hub.Commit(model, "main", []hubtest.File{{Path: "data.bin", Data: b, LFS: noLFS}})

	resp, body = e.Do(http.MethodGet, "/org/model/resolve/main/data.bin", "Authorization", auth, "Range", "bytes=2000000-2099999")
	switch commit := resp.Header.Get("X-Repo-Commit"); {
	case resp.StatusCode != 206:
		t.Fatalf("far range: status %d", resp.StatusCode)
	case commit == commitA && !bytes.Equal(body, a[2000000:2100000]):
		t.Fatalf("far range names commit A but holds other bytes (B's: %v)", bytes.Equal(body, b[2000000:2100000]))
	case commit == commitB && !bytes.Equal(body, b[2000000:2100000]):
		t.Fatalf("far range names commit B but holds other bytes")
	case commit != commitA && commit != commitB:
		t.Fatalf("X-Repo-Commit = %q", commit)
	}
	// The whole file, read through, is one commit's and verifies.
	resp, body = e.Do(http.MethodGet, "/org/model/resolve/"+commitA+"/data.bin", "Authorization", auth)
	if resp.StatusCode != 200 || !bytes.Equal(body, a) {
		t.Fatalf("whole file at A: %d, equal %v", resp.StatusCode, bytes.Equal(body, a))
	}
}

// The same through a chain of two proxies (edge → regional → hub), where the
// edge's upstream answers every file itself: the edge must ask for the commit
// it resolved, never the branch.
func TestMovingBranchThroughAProxyChain(t *testing.T) {
	h := hubtest.NewT(t, hubtest.Options{})
	a := hubtest.RandomBytes(21, 24<<20)
	b := hubtest.RandomBytes(22, 24<<20)
	commitA := h.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{{Path: "w.safetensors", Data: a}}})

	start := func(upstream string, revisionTTL time.Duration) *httptest.Server {
		built, err := app.Build(app.Config{Upstream: upstream, CacheDir: t.TempDir(), BlockSize: blockSize,
			RevisionTTL: revisionTTL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(built.Main)
		t.Cleanup(func() { srv.Close(); built.Close() })
		return srv
	}
	// The regional tier re-resolves branches at once, so it follows main.
	regional := start(h.URL, time.Nanosecond)
	edge := start(regional.URL, time.Hour)

	get := func(rng string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, edge.URL+"/org/model/resolve/main/w.safetensors", nil)
		req.Header.Set("Range", rng)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		return resp, buf.Bytes()
	}
	if resp, body := get("bytes=0-65535"); resp.StatusCode != 206 || !bytes.Equal(body, a[:65536]) {
		t.Fatalf("first range: %d", resp.StatusCode)
	}
	h.Commit(model, "main", []hubtest.File{{Path: "w.safetensors", Data: b}})
	off := int64(20 << 20)
	resp, body := get(fmt.Sprintf("bytes=%d-%d", off, off+1<<20-1))
	if resp.StatusCode != 206 || resp.Header.Get("X-Repo-Commit") != commitA {
		t.Fatalf("far range: %d, commit %q", resp.StatusCode, resp.Header.Get("X-Repo-Commit"))
	}
	if !bytes.Equal(body, a[off:off+1<<20]) {
		t.Fatalf("far range under commit A holds other bytes (B's: %v)", bytes.Equal(body, b[off:off+1<<20]))
	}
}

// A signed link that expires on the hub's own host (self-hosted hubs, a
// hubproxy tier) is resolved afresh, so a later full download completes
// rather than ending mid-body.
func TestExpiredLinkOnTheHubsOwnHostIsRefreshed(t *testing.T) {
	e := newEnv(t, hubtest.Options{CDNOnHub: true}, nil)
	data := hubtest.RandomBytes(31, 3<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{{Path: "w.safetensors", Data: data}}})
	if resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/w.safetensors", "Range", "bytes=0-99999"); resp.StatusCode != 206 || !bytes.Equal(body, data[:100000]) {
		t.Fatalf("first range: %d", resp.StatusCode)
	}
	e.Hub.ExpireURLs()
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, e.Proxy.URL+"/org/model/resolve/main/w.safetensors", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			_, err = buf.ReadFrom(resp.Body)
			if err != nil || resp.StatusCode != 200 || !bytes.Equal(buf.Bytes(), data) {
				t.Errorf("full GET after expiry: %d, %d of %d bytes, %v", resp.StatusCode, buf.Len(), len(data), err)
			}
		}()
	}
	wg.Wait()
}

var _ = hub.Model
