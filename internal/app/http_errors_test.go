package app_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// errorMessage is the JSON error body's message.
func errorMessage(body []byte) string {
	var m struct{ Error string }
	json.Unmarshal(body, &m)
	return m.Error
}

// A typo in a tensor route's query is refused, naming it and what it likely
// meant, instead of serving the whole tensor (world times the bytes the
// loader expects). The Hub's own routes still ignore parameters they do not
// know, as the Hub does.
func TestTensorRoutesRefuseUnknownParameters(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	st := hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "U8", Shape: []int64{8}, Data: []byte{0, 1, 2, 3, 4, 5, 6, 7}}}, nil)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{
		{Path: "model.safetensors", Data: st}, {Path: "config.json", Data: []byte(`{}`)},
	}})
	e.Hub.ResetCounters()
	resp, body := e.Do(http.MethodGet, "/models/org/model/tensors/w?shards=0:0/4")
	msg := errorMessage(body)
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Error-Code") != "BadRequest" ||
		!strings.Contains(msg, "shards") || !strings.Contains(msg, "did you mean shard") {
		t.Errorf("?shards=: %d %s %q, want 400 BadRequest naming shards and suggesting shard", resp.StatusCode, resp.Header.Get("X-Error-Code"), msg)
	}
	if n := e.Hub.Counters().Requests; n != 0 {
		t.Errorf("a refused query made %d upstream requests", n)
	}
	if resp, body := e.Do(http.MethodGet, "/models/org/model/tensors/w?shard=0:0/4"); resp.StatusCode != http.StatusOK || len(body) != 2 {
		t.Errorf("?shard=: %d, %d bytes; want 200 and a quarter of the tensor", resp.StatusCode, len(body))
	}
	for _, p := range []string{
		"/org/model/resolve/main/config.json?download=true",
		"/api/models/org/model?frobnicate=1",
	} {
		if resp, _ := e.Do(http.MethodGet, p); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d; the Hub's routes ignore unknown parameters", p, resp.StatusCode)
		}
	}
}

// file= that names no safetensors file or index is the caller's mistake
// (400), one that does not exist is the hub's 404; neither is an upstream
// failure (502).
func TestTensorFileParameterMistakesAre4xx(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	st := hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "U8", Shape: []int64{1}, Data: []byte{7}}}, nil)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{
		{Path: "model.safetensors", Data: st}, {Path: "config.json", Data: []byte(`{"model_type":"x"}`)},
	}})
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/models/org/model/tensors?file=config.json", http.StatusBadRequest, "BadRequest"},
		{"/models/org/model/tensors/w?file=config.json", http.StatusBadRequest, "BadRequest"},
		{"/models/org/model/safetensors?name=w&file=README.md", http.StatusBadRequest, "BadRequest"},
		{"/models/org/model/tensors?file=missing.safetensors", http.StatusNotFound, "EntryNotFound"},
		{"/models/org/model/tensors/w?file=missing.safetensors.index.json", http.StatusNotFound, "EntryNotFound"},
		{"/models/org/model/tensors?revision=nope", http.StatusNotFound, "RevisionNotFound"},
	} {
		resp, body := e.Do(http.MethodGet, tc.path)
		if resp.StatusCode != tc.status || resp.Header.Get("X-Error-Code") != tc.code {
			t.Errorf("%s: %d %s %q, want %d %s", tc.path, resp.StatusCode, resp.Header.Get("X-Error-Code"), errorMessage(body), tc.status, tc.code)
		}
	}
}

// Every error answer, the upstream's failures included, says what went
// wrong in X-Error-Code, from the contract's vocabulary: a client (or the
// person reading its log) can tell a hash mismatch from a hub outage.
func TestTensorAndFileUpstreamFailuresCarryACode(t *testing.T) {
	codes := loadSpec(t).errorCodes(t)
	e := newEnv(t, hubtest.Options{}, nil)
	var files []hubtest.File
	for i, name := range []string{"a", "b", "d", "e"} {
		data := hubtest.RandomBytes(uint64(71+i), 256<<10)
		files = append(files, hubtest.File{Path: name + ".bin", Data: data, LFS: lfs()})
	}
	st := hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "U8", Shape: []int64{256 << 10}, Data: hubtest.RandomBytes(70, 256<<10)}}, nil)
	files = append(files, hubtest.File{Path: "model.safetensors", Data: st, LFS: lfs()})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: files})
	// In this order: the hub's outage comes last, as it marks the
	// upstream down for the rest.
	for _, tc := range []struct {
		name   string
		faults hubtest.Faults
		path   string
		code   string
	}{
		{"wrong range", hubtest.Faults{WrongContentRange: hubtest.Fault{N: 1 << 10, Target: hubtest.TargetCDN}}, "/models/org/model/tensors/w?slice=0:100", "UpstreamProtocolError"},
		{"cut short", hubtest.Faults{Truncate: hubtest.Fault{N: 1 << 10, Target: hubtest.TargetCDN}, CutAt: 1000}, "/org/model/resolve/main/d.bin", "UpstreamCutShort"},
		{"CDN 5xx", hubtest.Faults{Status5xx: hubtest.Fault{N: 1 << 10, Target: hubtest.TargetCDN}}, "/org/model/resolve/main/b.bin", "UpstreamError"},
		{"hub 5xx", hubtest.Faults{Status5xx: hubtest.Fault{N: 1 << 10}}, "/org/model/resolve/main/e.bin", "Unverifiable"},
	} {
		e.Hub.SetFaults(tc.faults)
		resp, body := e.Do(http.MethodGet, tc.path, "Range", "bytes=0-99")
		e.Hub.SetFaults(hubtest.Faults{})
		code := resp.Header.Get("X-Error-Code")
		t.Logf("%s: %d %s %q", tc.name, resp.StatusCode, code, errorMessage(body))
		if resp.StatusCode < 500 {
			t.Errorf("%s: %d, want an upstream failure (5xx)", tc.name, resp.StatusCode)
		}
		if code == "" || !slices.Contains(codes, code) || tc.code != "" && code != tc.code {
			t.Errorf("%s: X-Error-Code %q, want %q (or, unset, any of the contract's vocabulary)", tc.name, code, tc.code)
		}
	}

	// A redirect to a host outside redirect-hosts breaks the protocol
	// hubproxy holds upstream to.
	e = newEnv(t, hubtest.Options{}, func(c *app.Config) { c.RedirectHosts = []string{"cdn.example"} })
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: files})
	e.Hub.SetFaults(hubtest.Faults{RedirectForeign: hubtest.Fault{N: 1}})
	if resp, _ := e.Do(http.MethodGet, "/org/model/resolve/main/a.bin"); resp.StatusCode != http.StatusBadGateway ||
		resp.Header.Get("X-Error-Code") != "UpstreamProtocolError" {
		t.Errorf("redirect to an unlisted host: %d %q, want 502 UpstreamProtocolError", resp.StatusCode, resp.Header.Get("X-Error-Code"))
	}
}

// listenProxy reserves an address for a hubproxy and returns it, and the
// function that builds and serves that hubproxy over upstream: so that
// proxies can be pointed at themselves or at each other.
func listenProxy(t *testing.T) (self string, start func(upstream string)) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	self = "http://" + srv.Listener.Addr().String()
	t.Cleanup(srv.Close)
	return self, func(upstream string) {
		t.Helper()
		h, err := app.Build(app.Config{Upstream: upstream, CacheDir: t.TempDir(), BlockSize: blockSize}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close(); h.Close() }) // the listener first: no request finds the cache closed
		srv.Config.Handler = h.Main
		srv.Start()
	}
}

// A proxy pointed at itself answers at once with 508 LoopDetected, naming
// the setting to fix, rather than waiting on itself until it times out.
func TestLoopToItselfIs508(t *testing.T) {
	url, serve := listenProxy(t)
	serve(url)
	for _, p := range []string{
		"/org/model/resolve/main/config.json",
		"/api/models/org/model",
		"/models/org/model/tensors",
	} {
		start := time.Now()
		resp, err := http.Get(url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != http.StatusLoopDetected || resp.Header.Get("X-Error-Code") != "LoopDetected" ||
			!strings.Contains(resp.Header.Get("X-Error-Message"), "upstream points back at itself") {
			t.Errorf("%s: %d %q %q, want 508 LoopDetected", p, resp.StatusCode, resp.Header.Get("X-Error-Code"), resp.Header.Get("X-Error-Message"))
		}
		if took > 3*time.Second {
			t.Errorf("%s: answered after %s; a loop must be refused at once", p, took)
		}
	}
}

// Two proxies pointed at each other (A → B → A) are caught too: A sees its
// own name in the Via that B carried on.
func TestLoopThroughAnotherProxyIs508(t *testing.T) {
	aURL, startA := listenProxy(t)
	bURL, startB := listenProxy(t)
	startA(bURL)
	startB(aURL)
	start := time.Now()
	resp, err := http.Get(aURL + "/org/model/resolve/main/config.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusLoopDetected || resp.Header.Get("X-Error-Code") != "LoopDetected" {
		t.Errorf("A → B → A: %d %q, want 508 LoopDetected", resp.StatusCode, resp.Header.Get("X-Error-Code"))
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("answered after %s", took)
	}
}
