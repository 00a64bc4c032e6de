package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// The Python loader (python/hubproxy) against a real hubproxy over the fake
// hub: python/tests compares what hubproxy.load_file and safe_open return
// with an independent reading of the same files, and checks, through the
// stats endpoint below, which requests reached hubproxy and how many bytes
// the hub served for them.

// loaderRecord is one request to hubproxy, as the Python tests see it.
type loaderRecord struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query"`
	Range  string `json:"range"`
	Status int    `json:"status"`
	Bytes  int64  `json:"bytes"`
}

// loaderProxy wraps hubproxy's handler and logs every request to it.
type loaderProxy struct {
	next http.Handler
	mu   sync.Mutex
	log  []loaderRecord
}

type loaderWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (w *loaderWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *loaderWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *loaderWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (c *loaderProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cw := &loaderWriter{ResponseWriter: w}
	c.next.ServeHTTP(cw, r)
	c.mu.Lock()
	c.log = append(c.log, loaderRecord{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Range"), cw.status, cw.n})
	c.mu.Unlock()
}

// statsHandler serves GET /stats (hubproxy's requests, and the hub's body
// bytes by file) and POST /reset, for the Python tests' byte counts.
func loaderStats(h *hubtest.Hub, c *loaderProxy) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
		h.ResetCounters()
		c.mu.Lock()
		c.log = nil
		c.mu.Unlock()
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		log := append([]loaderRecord{}, c.log...)
		c.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"proxy": log, "upstream_bytes": h.Counters().BytesByPath})
	})
	return mux
}

// loaderRepos puts the repos python/tests/test_e2e.py reads on the hub.
func loaderRepos(t *testing.T, h *hubtest.Hub) {
	t.Helper()
	// Every safetensors dtype, 0-d, empty and odd-sized tensors (so later
	// ones sit at unaligned offsets), and a 2 MiB one.
	every := []hubtest.Tensor{
		{Name: "bool", DType: "BOOL", Shape: []int64{3}, Data: []byte{0, 1, 1}},
		{Name: "u8", DType: "U8", Shape: []int64{5}},
		{Name: "i8", DType: "I8", Shape: []int64{2, 3}},
		{Name: "i16", DType: "I16", Shape: []int64{7}},
		{Name: "u16", DType: "U16", Shape: []int64{4}},
		{Name: "i32", DType: "I32", Shape: []int64{3, 3}},
		{Name: "u32", DType: "U32", Shape: []int64{2}},
		{Name: "scalar.i64", DType: "I64", Shape: []int64{}},
		{Name: "u64", DType: "U64", Shape: []int64{3}},
		{Name: "f16", DType: "F16", Shape: []int64{5}},
		{Name: "bf16", DType: "BF16", Shape: []int64{2, 4}},
		{Name: "empty.f32", DType: "F32", Shape: []int64{0, 8}},
		{Name: "f64", DType: "F64", Shape: []int64{3}},
		{Name: "f8.e4m3", DType: "F8_E4M3", Shape: []int64{4}},
		{Name: "f8.e5m2", DType: "F8_E5M2", Shape: []int64{4}},
		{Name: "f8.e8m0", DType: "F8_E8M0", Shape: []int64{2}},
		{Name: "f4", DType: "F4", Shape: []int64{2, 4}},
		{Name: "f6.e2m3", DType: "F6_E2M3", Shape: []int64{4}},
		{Name: "c64", DType: "C64", Shape: []int64{2}},
		{Name: "big.f32", DType: "F32", Shape: []int64{512, 1024}},
	}
	// Only dtypes every torch has, for the plain comparisons.
	plain := []hubtest.Tensor{
		{Name: "mask", DType: "BOOL", Shape: []int64{5}, Data: []byte{1, 0, 0, 1, 1}},
		{Name: "embed.weight", DType: "F32", Shape: []int64{256, 1024}},
		{Name: "scalar", DType: "I64", Shape: []int64{}},
		{Name: "norm.bf16", DType: "BF16", Shape: []int64{3, 64}},
		{Name: "empty", DType: "F16", Shape: []int64{0}},
		{Name: "u8", DType: "U8", Shape: []int64{3}},
		{Name: "i8", DType: "I8", Shape: []int64{7}},
		{Name: "f64", DType: "F64", Shape: []int64{2, 2}},
		{Name: "i32", DType: "I32", Shape: []int64{3}},
		{Name: "i16", DType: "I16", Shape: []int64{5}},
		{Name: "c64", DType: "C64", Shape: []int64{3}},
		{Name: "proj.weight", DType: "F16", Shape: []int64{96, 40}},
	}
	partial := append([]hubtest.Tensor{}, plain...)
	partial[1] = hubtest.Tensor{Name: "embed.weight", DType: "F32", Shape: []int64{512, 1024}}
	// Hostile: b overlaps a.
	overlap := []byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`)
	bad := append(loaderLE64(uint64(len(overlap))), overlap...)
	bad = append(bad, make([]byte, 12)...)
	huge := append(loaderLE64(1<<40), []byte(`{"a":1}`)...)

	// For tensor-parallel shards: every tensor has a dimension 0.
	shardable := []hubtest.Tensor{plain[1], plain[3], plain[4], plain[11], {Name: "odd", DType: "I32", Shape: []int64{10, 3}}}

	meta := map[string]string{"format": "pt", "note": "hubproxy loader test"}
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/model", Files: []hubtest.File{
		{Path: "every.safetensors", Data: hubtest.Safetensors(every, meta)},
		// Copies read by one test each, so that what the hub served for
		// them counts only that test's reads whatever order tests run in;
		// their headers differ, or they would share every's cached blob.
		{Path: "lazy.safetensors", Data: hubtest.Safetensors(every, map[string]string{"copy": "lazy"})},
		{Path: "slice.safetensors", Data: hubtest.Safetensors(every, nil)},
		{Path: "shard.safetensors", Data: hubtest.Safetensors(shardable, nil)},
		{Path: "model.safetensors", Data: hubtest.Safetensors(plain, meta)},
		{Path: "partial.safetensors", Data: hubtest.Safetensors(partial, nil)},
		{Path: "bad.safetensors", Data: bad},
		{Path: "huge.safetensors", Data: huge},
		{Path: "config.json", Data: []byte(`{"model_type":"test"}`)},
	}})
	gated := hub.MustRepo(hub.Model, "org/gated")
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: gated.ID(), Gated: true, Files: []hubtest.File{
		{Path: "model.safetensors", Data: hubtest.Safetensors(plain[:4], meta)},
	}})
	h.ApproveToken(gated, "hf_approved")
}

func loaderLE64(v uint64) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return b
}

func TestPythonLoader(t *testing.T) {
	const python = "/usr/bin/python3" // Debian's, with python3-torch (.ci/run installs it)
	if out, err := exec.Command(python, "-c", "import torch").CombinedOutput(); err != nil {
		t.Fatalf("the Python loader's tests need %s with torch (apt-get install python3-torch): %v\n%s", python, err, out)
	}
	e := newEnv(t, hubtest.Options{}, nil)
	loaderRepos(t, e.Hub)
	counting := &loaderProxy{next: e.Proxy.Config.Handler}
	front := httptest.NewServer(counting)
	t.Cleanup(front.Close)
	stats := httptest.NewServer(loaderStats(e.Hub, counting))
	t.Cleanup(stats.Close)

	// model.safetensors is cached whole (for the mmap tests); partial's
	// header only, so its blob is partial and must never be read.
	if resp, body := e.Do(http.MethodGet, "/org/model/resolve/main/model.safetensors"); resp.StatusCode != 200 {
		t.Fatalf("warming model.safetensors: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.Do(http.MethodGet, "/models/org/model/tensors?file=partial.safetensors"); resp.StatusCode != 200 {
		t.Fatalf("listing partial.safetensors: %d %s", resp.StatusCode, body)
	}
	loaderWaitFor(t, func() bool {
		_, err := os.Stat(filepath.Join(e.Dir, "models--org--model", "snapshots"))
		return err == nil
	})

	root, err := filepath.Abs("../../python")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover", "-v", "-s", filepath.Join(root, "tests"), "-t", root)
	cmd.Dir = root
	env := []string{}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "HF_TOKEN" && k != "HUBPROXY_ADMIN_SOCKET" && k != "HUBPROXY_ADMIN" &&
			k != "HF_HUB_OFFLINE" && k != "HUBPROXY_CACHE_DIR" && k != "PYTHONPATH" {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PYTHONPATH="+root, "PYTHONDONTWRITEBYTECODE=1",
		"HF_ENDPOINT="+front.URL, "HUBPROXY_TEST_STATS="+stats.URL,
		"HUBPROXY_TEST_CACHE="+e.Dir, "HUBPROXY_TEST_UPSTREAM="+e.Hub.URL)
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest:\n%s", out)
	if err != nil {
		t.Fatalf("the Python loader's tests failed: %v", err)
	}
	// They must all have run: a skip here (no server, no torch) is a failure.
	if regexp.MustCompile(`(?m)skipped|^OK \(skipped`).Match(out) {
		t.Error("some Python tests were skipped")
	}
	if ran := regexp.MustCompile(`Ran (\d+) tests?`).FindSubmatch(out); ran == nil || string(ran[1]) == "0" {
		t.Error("no Python test ran")
	}
}

func loaderWaitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("timed out waiting")
}
