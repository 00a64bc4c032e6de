package app_test

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/apptest"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// env is one fake hub plus one hubproxy in front of it.
type env = apptest.Env

const blockSize = apptest.BlockSize

func newEnv(t *testing.T, hopts hubtest.Options, tweak func(*app.Config)) *env {
	t.Helper()
	return apptest.New(t, hopts, tweak)
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

var model = hub.MustRepo(hub.Model, "org/model")

func lfs() *bool { t := true; return &t }

func TestHeadAnswersWithHubHeaders(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	weights := hubtest.RandomBytes(1, 3<<20)
	config := []byte(`{"model_type":"gpt2"}`)
	commit := e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{
		{Path: "model.safetensors", Data: weights}, {Path: "config.json", Data: config},
	}})
	e.Hub.ResetCounters()

	resp, _ := e.Do(http.MethodHead, "/org/model/resolve/main/model.safetensors")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD status %d", resp.StatusCode)
	}
	want := map[string]string{
		"X-Repo-Commit":  commit,
		"Etag":           `"` + sha(weights) + `"`,
		"X-Linked-Etag":  `"` + sha(weights) + `"`,
		"X-Linked-Size":  fmt.Sprint(len(weights)),
		"Content-Length": fmt.Sprint(len(weights)),
		"Accept-Ranges":  "bytes",
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("HEAD %s = %q, want %q", k, got, v)
		}
	}
	for k := range resp.Header {
		if k == "Location" || k == "Link" || strings.HasPrefix(k, "X-Xet") || k == "Content-Encoding" {
			t.Errorf("HEAD leaks %s: %q", k, resp.Header.Get(k))
		}
	}
	// A regular file's ETag is its git blob sha1.
	resp, _ = e.Do(http.MethodHead, "/org/model/resolve/main/config.json")
	gitsha := gitBlobSHA1(config)
	if got := resp.Header.Get("ETag"); got != `"`+gitsha+`"` {
		t.Errorf("config.json ETag = %q, want git sha1 %q", got, gitsha)
	}
	if got := resp.Header.Get("Content-Length"); got != fmt.Sprint(len(config)) {
		t.Errorf("config.json Content-Length = %q", got)
	}
	if c := e.Hub.Counters(); c.CDNRequests != 0 || c.BodyBytes != 0 {
		t.Errorf("HEAD touched file content upstream: %+v", c)
	}
	// HEADs are answered from the resolver cache the second time.
	before := e.Hub.Counters().ResolveRequests
	e.Do(http.MethodHead, "/org/model/resolve/main/model.safetensors")
	if after := e.Hub.Counters().ResolveRequests; after != before {
		t.Errorf("second HEAD resolved upstream again (%d → %d)", before, after)
	}
}

func TestFullDownloadThenCachedAndHFLayout(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := hubtest.RandomBytes(2, 20<<20+12345)
	small := []byte("hello world\n")
	commit := e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{
		{Path: "sub/weights.bin", Data: data}, {Path: "README.md", Data: small},
	}})

	resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/sub/weights.bin", "Authorization", "Bearer hf_user")
	if resp.StatusCode != http.StatusOK || sha(body) != sha(data) {
		t.Fatalf("GET: status %d, %d bytes, sha match %v", resp.StatusCode, len(body), sha(body) == sha(data))
	}
	if _, b := e.Do(http.MethodGet, "/org/model/resolve/main/README.md"); !bytes.Equal(b, small) {
		t.Fatalf("README.md = %q", b)
	}
	c := e.Hub.Counters()
	t.Logf("cold download: %d upstream body bytes for %d-byte file", c.BodyBytes, len(data)+len(small))
	if c.AuthSeenByCDN != 0 {
		t.Errorf("credentials reached the CDN %d times", c.AuthSeenByCDN)
	}

	e.Hub.ResetCounters()
	_, body = e.Do(http.MethodGet, "/org/model/resolve/main/sub/weights.bin")
	if sha(body) != sha(data) {
		t.Fatal("second read differs")
	}
	if c := e.Hub.Counters(); c.BodyBytes != 0 || c.CDNRequests != 0 {
		t.Errorf("second read cost upstream bytes: %+v", c)
	}

	// The cache dir is an HF_HUB_CACHE: refs → snapshot symlink → verified blob.
	root := filepath.Join(e.Dir, "models--org--model")
	ref, err := os.ReadFile(filepath.Join(root, "refs", "main"))
	if err != nil || string(ref) != commit {
		t.Fatalf("refs/main = %q, %v; want %s", ref, err, commit)
	}
	link := filepath.Join(root, "snapshots", commit, "sub", "weights.bin")
	target, err := os.Readlink(link)
	if err != nil || filepath.IsAbs(target) {
		t.Fatalf("snapshot link %q: %v (must be relative)", target, err)
	}
	got, err := os.ReadFile(link)
	if err != nil || sha(got) != sha(data) {
		t.Fatalf("snapshot content: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "blobs", sha(data))); err != nil {
		t.Fatalf("blob not named by sha256: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "blobs", gitBlobSHA1(small))); err != nil {
		t.Fatalf("small file blob not named by git sha1: %v", err)
	}
}

func TestRangeInTheMiddleOfAColdFile(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := hubtest.RandomBytes(3, 200<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "big.safetensors", Data: data}}})
	e.Hub.ResetCounters()

	start := int64(100<<20 + 12345)
	end := start + 1<<20 - 1
	resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/big.safetensors", "Range", fmt.Sprintf("bytes=%d-%d", start, end))
	if resp.StatusCode != http.StatusPartialContent {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if want := fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)); resp.Header.Get("Content-Range") != want {
		t.Errorf("Content-Range %q, want %q", resp.Header.Get("Content-Range"), want)
	}
	if !bytes.Equal(body, data[start:end+1]) {
		t.Fatal("range bytes differ")
	}
	got := e.Hub.Counters().BodyBytes
	limit := int64(1<<20 + 2*blockSize)
	t.Logf("1 MiB range in a cold 200 MB file: %d upstream bytes (limit %d)", got, limit)
	if got > limit {
		t.Errorf("upstream bytes %d > %d", got, limit)
	}
}

func TestConcurrentColdReadersShareOneFill(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := hubtest.RandomBytes(4, 48<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "w.safetensors", Data: data}}})
	e.Hub.ResetCounters()

	const readers = 16
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(e.Proxy.URL + "/org/model/resolve/main/w.safetensors")
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			h := sha256.New()
			if _, err := io.Copy(h, resp.Body); err != nil {
				errs <- err
				return
			}
			if hex.EncodeToString(h.Sum(nil)) != sha(data) {
				errs <- fmt.Errorf("reader got wrong bytes")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := e.Hub.Counters().BodyBytes
	ratio := float64(got) / float64(len(data))
	t.Logf("16 concurrent cold readers: %d upstream bytes = %.4f × file size", got, ratio)
	if ratio > 1.05 {
		t.Errorf("upstream bytes %.3f × size, want ≤ 1.05", ratio)
	}
}

func TestColdDownloadStreams(t *testing.T) {
	// A per-connection bandwidth cap makes the fill take a while; the first
	// bytes must reach the client long before it is done.
	e := newEnv(t, hubtest.Options{BandwidthPerConn: 4 << 20}, nil)
	data := hubtest.RandomBytes(5, 32<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "w.safetensors", Data: data}}})
	e.Hub.ResetCounters()

	resp, err := http.Get(e.Proxy.URL + "/org/model/resolve/main/w.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	upstreamAtFirstByte := e.Hub.Counters().BodyBytes
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if sha(append(first, rest...)) != sha(data) {
		t.Fatal("streamed bytes differ")
	}
	t.Logf("first byte served when upstream had sent %d of %d bytes", upstreamAtFirstByte, len(data))
	if upstreamAtFirstByte >= int64(len(data))/2 {
		t.Errorf("first byte only after %d of %d bytes arrived upstream: not streaming", upstreamAtFirstByte, len(data))
	}
}

func TestCorruptUpstreamIsNeverPromoted(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := hubtest.RandomBytes(6, 5<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "w.safetensors", Data: data}}})
	e.Hub.SetFaults(hubtest.Faults{CorruptBytes: hubtest.Fault{N: 1000, Target: hubtest.TargetCDN}, CorruptPath: "w.safetensors"})

	resp, err := http.Get(e.Proxy.URL + "/org/model/resolve/main/w.safetensors")
	if err == nil {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil && resp.StatusCode == http.StatusOK && len(body) == len(data) {
			t.Fatal("a corrupt file was served as a complete download")
		}
	}
	blob := filepath.Join(e.Dir, "models--org--model", "blobs", sha(data))
	if _, err := os.Stat(blob); err == nil {
		t.Fatal("corrupt content promoted into blobs/")
	}
	t.Logf("faults: %v", e.Hub.FaultCounts())

	// Once upstream is healthy the file is fetched again and verifies.
	e.Hub.SetFaults(hubtest.Faults{})
	_, body := e.Do(http.MethodGet, "/org/model/resolve/main/w.safetensors")
	if sha(body) != sha(data) {
		t.Fatal("refetch after corruption gave wrong bytes")
	}
	if _, err := os.Stat(blob); err != nil {
		t.Fatalf("healthy refetch not promoted: %v", err)
	}
}

func TestLyingUpstreamNeverYieldsWrongBytes(t *testing.T) {
	faults := []struct {
		name string
		f    hubtest.Faults
	}{
		{"truncate", hubtest.Faults{Truncate: hubtest.Fault{N: 2, Target: hubtest.TargetCDN}}},
		{"ignore-range", hubtest.Faults{IgnoreRange: hubtest.Fault{N: 2, Target: hubtest.TargetCDN}}},
		{"wrong-content-range", hubtest.Faults{WrongContentRange: hubtest.Fault{N: 2, Target: hubtest.TargetCDN}}},
		{"5xx", hubtest.Faults{Status5xx: hubtest.Fault{N: 3, Target: hubtest.TargetCDN}}},
		{"reset", hubtest.Faults{ResetMidBody: hubtest.Fault{N: 2, Target: hubtest.TargetCDN}}},
		{"stall", hubtest.Faults{StallBody: hubtest.Fault{N: 1, Target: hubtest.TargetCDN}}},
		{"5xx-burst-any", hubtest.Faults{Status5xx: hubtest.Fault{N: 6}}},
		{"redirect-foreign", hubtest.Faults{RedirectForeign: hubtest.Fault{N: 1}}},
	}
	for i, tc := range faults {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, hubtest.Options{}, func(c *app.Config) { c.StallTimeout = 300 * time.Millisecond })
			data := hubtest.RandomBytes(uint64(10+i), 3<<20)
			e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "w.safetensors", Data: data}}})
			e.Hub.SetFaults(tc.f)
			req, _ := http.NewRequest(http.MethodGet, e.Proxy.URL+"/org/model/resolve/main/w.safetensors", nil)
			req.Header.Set("Authorization", "Bearer hf_caller")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				body, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if rerr == nil && resp.StatusCode == http.StatusOK && sha(body) != sha(data) {
					t.Fatal("wrong bytes served as a complete download")
				}
			}
			e.Hub.SetFaults(hubtest.Faults{})
			_, body := e.Do(http.MethodGet, "/org/model/resolve/main/w.safetensors", "Authorization", "Bearer hf_caller")
			if sha(body) != sha(data) {
				t.Fatal("wrong bytes after the fault cleared")
			}
			if c := e.Hub.Counters(); c.AuthSeenByForeign != 0 || c.AuthSeenByCDN != 0 {
				t.Errorf("credentials left the upstream: foreign %d, CDN %d", c.AuthSeenByForeign, c.AuthSeenByCDN)
			}
			t.Logf("%s: faults fired %v", tc.name, e.Hub.FaultCounts())
		})
	}
}

func TestZeroByteFileAnswersRangeProbes(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "empty.txt", Data: []byte{}}}})
	resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/empty.txt", "Range", "bytes=0-0")
	// The JS client's fileDownloadInfo probes with bytes=0-0 and reads the
	// size after the '/' of Content-Range.
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Range") != "bytes */0" {
		t.Errorf("zero-byte probe: %d, %d bytes, Content-Range %q", resp.StatusCode, len(body), resp.Header.Get("Content-Range"))
	}
	if resp, _ := e.Do(http.MethodHead, "/org/model/resolve/main/empty.txt"); resp.Header.Get("Content-Length") != "0" || resp.Header.Get("X-Linked-Size") != "0" {
		t.Errorf("zero-byte HEAD: %v", resp.Header)
	}
}

func TestRedirectToAnUnlistedHostIsRefused(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	e.Cfg.RedirectHosts = []string{"cdn.example"}
	e.Start()
	data := hubtest.RandomBytes(31, 2<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "w.safetensors", Data: data}}})
	e.Hub.SetFaults(hubtest.Faults{RedirectForeign: hubtest.Fault{N: 1}})
	resp, _ := e.Do(http.MethodGet, "/org/model/resolve/main/w.safetensors")
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("redirect to an unlisted host: %d, want 502", resp.StatusCode)
	}
	if c := e.Hub.Counters(); c.ForeignRequests != 0 {
		t.Errorf("the foreign host was contacted %d times", c.ForeignRequests)
	}
}

func TestHubErrorsPassThroughWithCodes(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	commit := e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "a.txt", Data: []byte("a")}}})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/gated", Gated: true, ApprovedTokens: []string{"hf_ok"},
		Files: []hubtest.File{{Path: "w.safetensors", Data: hubtest.RandomBytes(7, 1<<20)}}})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/private", Private: true, ApprovedTokens: []string{"hf_ok"},
		Files: []hubtest.File{{Path: "a.txt", Data: []byte("a")}}})

	tests := []struct {
		method, path, auth string
		status             int
		code               string
	}{
		{http.MethodHead, "/org/model/resolve/main/missing.txt", "", 404, "EntryNotFound"},
		{http.MethodGet, "/org/model/resolve/main/missing.txt", "", 404, "EntryNotFound"},
		{http.MethodHead, "/org/model/resolve/nobranch/a.txt", "", 404, "RevisionNotFound"},
		{http.MethodHead, "/org/nothere/resolve/main/a.txt", "", 401, "RepoNotFound"},
		{http.MethodHead, "/org/gated/resolve/main/w.safetensors", "", 401, "GatedRepo"},
		{http.MethodGet, "/org/gated/resolve/main/w.safetensors", "Bearer hf_nope", 403, "GatedRepo"},
		{http.MethodGet, "/org/gated/resolve/main/w.safetensors", "Bearer hf_ok", 200, ""},
		{http.MethodGet, "/api/models/org/gated/revision/main", "", 200, ""}, // gated metadata is public (docs/hub-protocol.md §9)
		{http.MethodGet, "/api/models/org/private/revision/main", "", 401, "RepoNotFound"},
		{http.MethodGet, "/api/models/org/private/revision/main", "Bearer hf_nope", 404, "RepoNotFound"},
		{http.MethodGet, "/org/model/resolve/main/..%2F..%2Fetc%2Fpasswd", "", 400, "BadRequest"},
		{http.MethodGet, "/api/models/org/model/xet-read-token/main", "", 404, "EntryNotFound"},
	}
	for _, tt := range tests {
		var hdr []string
		if tt.auth != "" {
			hdr = []string{"Authorization", tt.auth}
		}
		resp, _ := e.Do(tt.method, tt.path, hdr...)
		if resp.StatusCode != tt.status || resp.Header.Get("X-Error-Code") != tt.code {
			t.Errorf("%s %s (auth %q): %d %q, want %d %q", tt.method, tt.path, tt.auth,
				resp.StatusCode, resp.Header.Get("X-Error-Code"), tt.status, tt.code)
		}
		if tt.code == "EntryNotFound" && strings.Contains(tt.path, "/resolve/") && resp.Header.Get("X-Repo-Commit") != commit {
			t.Errorf("%s %s: X-Repo-Commit %q, want %q", tt.method, tt.path, resp.Header.Get("X-Repo-Commit"), commit)
		}
	}
}

func gitBlobSHA1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func TestWrongMethodsGetHubStyleErrors(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "a.txt", Data: []byte("a")}}})
	for _, p := range []string{"/org/model/resolve/main/a.txt", "/models/org/model/tensors"} {
		resp, body := e.Do(http.MethodPut, p)
		if resp.StatusCode != 405 || resp.Header.Get("X-Error-Code") != "MethodNotAllowed" || resp.Header.Get("Allow") != "GET, HEAD" || !bytes.Contains(body, []byte(`"error"`)) {
			t.Errorf("PUT %s: %d %q Allow %q %s", p, resp.StatusCode, resp.Header.Get("X-Error-Code"), resp.Header.Get("Allow"), body)
		}
	}
}
