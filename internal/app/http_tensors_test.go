package app_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// cdnStats sums the CDN requests and bytes for files whose path ends in suffix.
func cdnStats(h *hubtest.Hub, suffix string) (requests int, byteCount int64) {
	for _, r := range h.Requests() {
		q, _ := url.ParseQuery(r.Query)
		if strings.HasPrefix(r.Path, "/blobs/") && r.Method == http.MethodGet && strings.HasSuffix(q.Get("X-Hub-File"), suffix) {
			requests++
		}
	}
	for k, v := range h.Counters().BytesByPath {
		if strings.HasSuffix(k, suffix) {
			byteCount += v
		}
	}
	return requests, byteCount
}

// blobTraffic sums the GETs of the CDN blob of the file whose path ends in
// suffix: served is every body byte of their 206 answers (the file's bytes
// and any multipart framing); refusals counts multi-range requests the CDN
// answered with 200 and the whole file, and refused the bytes it wrote into
// them before the client hung up.
func blobTraffic(h *hubtest.Hub, suffix string) (served int64, refusals int, refused int64) {
	for _, r := range h.Requests() {
		q, _ := url.ParseQuery(r.Query)
		if !strings.HasPrefix(r.Path, "/blobs/") || r.Method != http.MethodGet || !strings.HasSuffix(q.Get("X-Hub-File"), suffix) {
			continue
		}
		switch {
		case r.Status == http.StatusPartialContent:
			served += r.Bytes
		case r.Status == http.StatusOK && strings.Contains(r.Range, ","):
			refusals++
			refused += r.Bytes
		}
	}
	return served, refusals, refused
}

// headerSize is 8 + N of a safetensors file.
func headerSize(b []byte) int64 { return 8 + int64(binary.LittleEndian.Uint64(b)) }

type listing struct {
	Commit string `json:"commit"`
	Files  []struct {
		Path     string            `json:"path"`
		Metadata map[string]string `json:"metadata"`
	} `json:"files"`
	Tensors []struct {
		Name   string   `json:"name"`
		DType  string   `json:"dtype"`
		Shape  []uint64 `json:"shape"`
		File   string   `json:"file"`
		Offset uint64   `json:"offset"`
		Length uint64   `json:"length"`
	} `json:"tensors"`
	Totals struct {
		Tensors    int               `json:"tensors"`
		Bytes      uint64            `json:"bytes"`
		Parameters uint64            `json:"parameters"`
		ByDType    map[string]uint64 `json:"parameters_by_dtype"`
	} `json:"totals"`
}

func TestListShardedModelFromHeadersOnly(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	files := hubtest.ShardedModel("model", 3, 6, 512, 256) // 256 KiB BF16 tensors
	commit := e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: files})
	e.Hub.ResetCounters()

	resp, body := e.Do(http.MethodGet, "/models/org/model/tensors?revision=main")
	if resp.StatusCode != 200 {
		t.Fatalf("listing: %d %s", resp.StatusCode, body)
	}
	var l listing
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatal(err)
	}
	if l.Commit != commit || len(l.Files) != 3 || l.Totals.Tensors != 18 || len(l.Tensors) != 18 {
		t.Fatalf("listing: commit %s, %d files, %d tensors", l.Commit, len(l.Files), l.Totals.Tensors)
	}
	if l.Totals.Parameters != 18*512*256 || l.Totals.ByDType["BF16"] != l.Totals.Parameters || l.Totals.Bytes != 2*l.Totals.Parameters {
		t.Errorf("totals %+v", l.Totals)
	}
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".safetensors") {
			continue
		}
		reqs, got := cdnStats(e.Hub, f.Path)
		limit := 2*headerSize(f.Data) + 128<<10
		t.Logf("%s: header %d bytes; %d upstream request(s), %d bytes (limit %d)", f.Path, headerSize(f.Data), reqs, got, limit)
		if reqs > 1 || got > limit {
			t.Errorf("%s: %d requests and %d bytes upstream, want ≤ 1 and ≤ %d", f.Path, reqs, got, limit)
		}
	}
	// Offsets are absolute: check one tensor against its bytes in the file.
	for _, te := range l.Tensors[:3] {
		for _, f := range files {
			if f.Path == te.File {
				_, got := e.Do(http.MethodGet, "/models/org/model/tensors/"+url.PathEscape(te.Name))
				if !bytes.Equal(got, f.Data[te.Offset:te.Offset+te.Length]) {
					t.Errorf("%s: bytes differ from file[%d:+%d]", te.Name, te.Offset, te.Length)
				}
			}
		}
	}
}

func TestLargeHeaderTakesASecondRead(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	var ts []hubtest.Tensor
	for i := range 3000 { // ~200 KB of header: more than the speculative read
		ts = append(ts, hubtest.Tensor{Name: fmt.Sprintf("model.layers.%d.mlp.some_long_projection_name.weight", i), DType: "F16", Shape: []int64{4, 4}})
	}
	file := hubtest.Safetensors(ts, map[string]string{"format": "pt"})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "model.safetensors", Data: file}}})
	e.Hub.ResetCounters()
	if resp, body := e.Do(http.MethodGet, "/models/org/model/tensors"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	reqs, got := cdnStats(e.Hub, "model.safetensors")
	limit := 2*headerSize(file) + 128<<10
	t.Logf("header %d bytes: %d requests, %d bytes upstream (limit %d)", headerSize(file), reqs, got, limit)
	if reqs > 2 || got > limit {
		t.Errorf("%d requests, %d bytes; want ≤ 2 and ≤ %d", reqs, got, limit)
	}
}

// bigModel is one file with a 64 MiB F32 matrix between two small tensors.
func bigModel(t *testing.T, e *env) (file []byte, big []byte) {
	t.Helper()
	big = hubtest.RandomBytes(77, 4096*4096*4)
	file = hubtest.Safetensors([]hubtest.Tensor{
		{Name: "a.bias", DType: "F32", Shape: []int64{4096}},
		{Name: "b.weight", DType: "F32", Shape: []int64{4096, 4096}, Data: big},
		{Name: "c.norm", DType: "BF16", Shape: []int64{4096}},
		{Name: "d.empty", DType: "F32", Shape: []int64{0, 8}},
	}, map[string]string{"format": "pt"})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "model.safetensors", Data: file}}})
	return file, big
}

func TestOneTensorCostsAboutItsSize(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	file, _ := bigModel(t, e)
	e.Do(http.MethodGet, "/models/org/model/tensors") // headers cached first
	e.Hub.ResetCounters()

	resp, body := e.Do(http.MethodGet, "/models/org/model/tensors/c.norm")
	if resp.StatusCode != 200 || resp.Header.Get("X-Tensor-Dtype") != "BF16" || resp.Header.Get("X-Tensor-Shape") != "[4096]" {
		t.Fatalf("c.norm: %d %v", resp.StatusCode, resp.Header)
	}
	_, got := cdnStats(e.Hub, "model.safetensors")
	limit := int64(len(body)) + 2*blockSize
	t.Logf("one 8 KiB tensor: %d upstream bytes (limit %d)", got, limit)
	if got > limit {
		t.Errorf("upstream %d > %d", got, limit)
	}
	// It is exactly the tensor's bytes in the file.
	off := int64(len(file)) - int64(len(body))
	if !bytes.Equal(body, file[off:]) {
		t.Error("c.norm bytes differ")
	}
	// Range on a tensor, HEAD, If-None-Match, an empty tensor, unknown names.
	resp, part := e.Do(http.MethodGet, "/models/org/model/tensors/c.norm", "Range", "bytes=10-19")
	if resp.StatusCode != 206 || !bytes.Equal(part, body[10:20]) {
		t.Errorf("range on tensor: %d", resp.StatusCode)
	}
	if resp, _ := e.Do(http.MethodHead, "/models/org/model/tensors/b.weight"); resp.Header.Get("Content-Length") != fmt.Sprint(4096*4096*4) || resp.Header.Get("ETag") == "" {
		t.Errorf("HEAD b.weight: %v", resp.Header)
	}
	etag := resp.Header.Get("ETag")
	if resp, _ := e.Do(http.MethodGet, "/models/org/model/tensors/c.norm", "If-None-Match", etag); etag == "" || resp.StatusCode != 304 {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
	if resp, b := e.Do(http.MethodGet, "/models/org/model/tensors/d.empty"); resp.StatusCode != 200 || len(b) != 0 || resp.Header.Get("X-Tensor-Shape") != "[0,8]" {
		t.Errorf("empty tensor: %d, %d bytes", resp.StatusCode, len(b))
	}
	if resp, _ := e.Do(http.MethodGet, "/models/org/model/tensors/nope"); resp.StatusCode != 404 || resp.Header.Get("X-Error-Code") != "EntryNotFound" {
		t.Errorf("unknown tensor: %d", resp.StatusCode)
	}
}

func TestTensorParallelShards(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	_, big := bigModel(t, e)
	e.Do(http.MethodGet, "/models/org/model/tensors")
	const rows, cols, world = 4096, 4096, 8
	row := func(i int) []byte { return big[i*cols*4 : (i+1)*cols*4] }

	for rank := range world {
		// Row shard: one contiguous range.
		e.Hub.ResetCounters()
		resp, body := e.Do(http.MethodGet, fmt.Sprintf("/models/org/model/tensors/b.weight?shard=0:%d/%d", rank, world))
		want := big[rank*rows/world*cols*4 : (rank+1)*rows/world*cols*4]
		if resp.StatusCode != 200 || !bytes.Equal(body, want) || resp.Header.Get("X-Tensor-Shape") != "[512,4096]" {
			t.Fatalf("row shard %d: %d, shape %s, equal %v", rank, resp.StatusCode, resp.Header.Get("X-Tensor-Shape"), bytes.Equal(body, want))
		}
		_, got := cdnStats(e.Hub, "model.safetensors")
		if limit := int64(len(want)) + 2*blockSize; got > limit {
			t.Errorf("row shard %d: %d upstream bytes > %d", rank, got, limit)
		}
		if rank == 0 {
			t.Logf("row shard 0/8 (%d bytes): %d upstream bytes", len(want), got)
		}
	}
	// Column shard, on a cold cache of its own: one strided range per row,
	// assembled in row-major order. Block fills would fetch the whole
	// tensor (every 64 KiB block holds four rows' pieces); the pieces go
	// upstream as multipart requests instead, costing about their bytes.
	var want bytes.Buffer
	for i := range rows {
		want.Write(row(i)[3*cols/world*4 : 4*cols/world*4])
	}
	// The row shards above cached the whole tensor: the column shard is
	// read from the cache, at no upstream cost.
	e.Hub.ResetCounters()
	if _, body := e.Do(http.MethodGet, "/models/org/model/tensors/b.weight?shard=1:3/8"); !bytes.Equal(body, want.Bytes()) {
		t.Fatal("warm column shard bytes differ")
	}
	if reqs, got := cdnStats(e.Hub, "model.safetensors"); reqs != 0 || got != 0 {
		t.Errorf("warm column shard: %d requests, %d bytes upstream; want none", reqs, got)
	}
	e = newEnv(t, hubtest.Options{}, nil)
	bigModel(t, e)
	e.Do(http.MethodGet, "/models/org/model/tensors")
	e.Hub.ResetCounters()
	resp, body := e.Do(http.MethodGet, "/models/org/model/tensors/b.weight?shard=1:3/8")
	if resp.Header.Get("X-Tensor-Shape") != "[4096,512]" {
		t.Errorf("column shard shape %s", resp.Header.Get("X-Tensor-Shape"))
	}
	if !bytes.Equal(body, want.Bytes()) {
		t.Fatal("column shard bytes differ")
	}
	reqs, content := cdnStats(e.Hub, "model.safetensors")
	wire, refusals, _ := blobTraffic(e.Hub, "model.safetensors")
	limit := int64(len(body)) * 3 / 2
	t.Logf("column shard 3/8 (%d bytes in %d ranges): %d upstream requests, %d bytes (%d of the file's, the rest multipart framing; limit %d)", len(body), rows, reqs, wire, content, limit)
	if wire > limit || content > limit || refusals != 0 {
		t.Errorf("column shard: %d upstream bytes (%d content), %d refusals; want ≤ %d, none", wire, content, refusals, limit)
	}
	// An explicit slice, and bad specs.
	resp, body = e.Do(http.MethodGet, "/models/org/model/tensors/b.weight?slice=5:7,10:12")
	if resp.Header.Get("X-Tensor-Shape") != "[2,2]" || !bytes.Equal(body, append(append([]byte{}, row(5)[40:48]...), row(6)[40:48]...)) {
		t.Errorf("slice: shape %s", resp.Header.Get("X-Tensor-Shape"))
	}
	for _, q := range []string{"shard=2:0/8", "shard=0:8/8", "shard=0:1/0", "shard=x", "slice=9000:9001", "slice=1:2,3:4,5:6", "shard=0:0/2&slice=0:1"} {
		if resp, _ := e.Do(http.MethodGet, "/models/org/model/tensors/b.weight?"+q); resp.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", q, resp.StatusCode)
		}
	}
}

// On an upstream that ignores multi-range requests (200, the whole file), a
// column shard falls back to parallel single-range requests: the first
// sparse read pays one refused answer (closed unread; what the transport
// took in of it is the cost), and from then on the host is asked single
// ranges only, each shard costing its own bytes.
func TestColumnShardWithoutMultipart(t *testing.T) {
	e := newEnv(t, hubtest.Options{SingleRanges: true}, nil)
	_, big := bigModel(t, e)
	e.Do(http.MethodGet, "/models/org/model/tensors")
	const rows, cols, world = 4096, 4096, 8
	for i, rank := range []int{3, 5} {
		e.Hub.ResetCounters()
		resp, body := e.Do(http.MethodGet, fmt.Sprintf("/models/org/model/tensors/b.weight?shard=1:%d/%d", rank, world))
		var want bytes.Buffer
		for r := range rows {
			want.Write(big[(r*cols+rank*cols/world)*4 : (r*cols+(rank+1)*cols/world)*4])
		}
		if resp.StatusCode != 200 || !bytes.Equal(body, want.Bytes()) {
			t.Fatalf("column shard %d: %d, equal %v", rank, resp.StatusCode, bytes.Equal(body, want.Bytes()))
		}
		reqs, _ := cdnStats(e.Hub, "model.safetensors")
		served, refusals, refused := blobTraffic(e.Hub, "model.safetensors")
		limit := int64(len(body)) * 3 / 2
		t.Logf("column shard %d/8 (%d bytes): %d requests, %d bytes in 206 answers, %d refused answer(s) costing %d bytes (limit %d)",
			rank, len(body), reqs, served, refusals, refused, limit)
		if wantRefusals := 1 - i; refusals != wantRefusals {
			t.Errorf("column shard %d: %d refused multi-range requests, want %d", rank, refusals, wantRefusals)
		}
		if served > limit || (i > 0 && served+refused > limit) {
			t.Errorf("column shard %d: %d bytes served (+%d refused), want ≤ %d", rank, served, refused, limit)
		}
	}
}

// A multipart answer that lies (a part of other bytes than asked, labelled
// truthfully) or breaks off fails the column shard: the client sees an
// error status, never a complete body of wrong bytes; the next request, with the
// fault spent, gets the right bytes.
func TestColumnShardLyingMultipart(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	_, big := bigModel(t, e)
	e.Do(http.MethodGet, "/models/org/model/tensors")
	const rows, cols = 4096, 4096
	var want bytes.Buffer
	for r := range rows {
		want.Write(big[(r*cols+cols/2)*4 : (r*cols+cols/2+cols/8)*4])
	}
	for name, f := range map[string]hubtest.Faults{
		"WrongContentRange": {WrongContentRange: hubtest.Fault{N: 1, Target: hubtest.TargetCDN}},
		"Truncate":          {Truncate: hubtest.Fault{N: 1, Target: hubtest.TargetCDN}, CutAt: 3000},
		"ResetMidBody":      {ResetMidBody: hubtest.Fault{N: 1, Target: hubtest.TargetCDN}, CutAt: 3000},
	} {
		e.Hub.SetFaults(f)
		status, body, err := get(e, "/models/org/model/tensors/b.weight?shard=1:4/8")
		if err == nil && status == http.StatusOK && len(body) == want.Len() {
			t.Errorf("%s: a complete 200 (equal to the shard: %v)", name, bytes.Equal(body, want.Bytes()))
		}
		// The fault hits the first batch, read before the status line:
		// the client gets an error answer, not a 200 that breaks off.
		if status != http.StatusBadGateway {
			t.Errorf("%s: status %d, want 502", name, status)
		}
		if e.Hub.FaultCounts()[name] != 1 {
			t.Errorf("%s: the fault did not fire (%v)", name, e.Hub.FaultCounts())
		}
		t.Logf("%s: status %d, %d bytes, %v", name, status, len(body), err)
		if _, body := e.Do(http.MethodGet, "/models/org/model/tensors/b.weight?shard=1:4/8"); !bytes.Equal(body, want.Bytes()) {
			t.Errorf("%s: the next request got wrong bytes", name)
		}
	}
}

// get is e.do for answers that may break off: the status, what arrived and
// how reading it ended. Its connection is new and not kept: on a reused one,
// net/http would quietly resend a GET whose answer broke off before its
// first byte, hiding the failure.
func get(e *env, path string) (int, []byte, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(e.Proxy.URL + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func TestSubsetFileIsAValidSafetensorsFile(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for the independent safetensors reader: install python3")
	}
	e := newEnv(t, hubtest.Options{}, nil)
	files := hubtest.ShardedModel("model", 3, 4, 64, 32)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: files})
	_, body := e.Do(http.MethodGet, "/models/org/model/tensors")
	var l listing
	json.Unmarshal(body, &l)
	// Pick tensors from two shards by name, and a prefix.
	pick := []string{l.Tensors[0].Name, l.Tensors[len(l.Tensors)-1].Name}
	q := url.Values{"name": pick, "prefix": {l.Tensors[5].Name}}
	resp, subset := e.Do(http.MethodGet, "/models/org/model/safetensors?"+q.Encode())
	if resp.StatusCode != 200 {
		t.Fatalf("subset: %d %s", resp.StatusCode, subset)
	}
	path := filepath.Join(t.TempDir(), "subset.safetensors")
	os.WriteFile(path, subset, 0o644)
	// An independent reader: Python's json and struct, nothing of ours.
	script := `
import json, struct, sys, hashlib
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8+n])
meta = h.pop('__metadata__', None)
ends = sorted(v['data_offsets'] for v in h.values())
pos = 0
for a, z in ends:
    assert a == pos, (a, pos)
    pos = z
assert 8 + n + pos == len(b), 'buffer not covered'
print(json.dumps({k: {'dtype': v['dtype'], 'shape': v['shape'], 'sha': hashlib.sha256(b[8+n+v['data_offsets'][0]:8+n+v['data_offsets'][1]]).hexdigest()} for k, v in h.items()}))
`
	out, err := exec.Command(python, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("python reader: %v\n%s", err, out)
	}
	var got map[string]struct {
		DType string   `json:"dtype"`
		Shape []uint64 `json:"shape"`
		SHA   string   `json:"sha"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]bool{pick[0]: true, pick[1]: true}
	for _, te := range l.Tensors {
		if strings.HasPrefix(te.Name, l.Tensors[5].Name) {
			want[te.Name] = true
		}
	}
	if len(got) != len(want) {
		t.Errorf("subset has %d tensors, want %d", len(got), len(want))
	}
	for _, te := range l.Tensors {
		if !want[te.Name] {
			continue
		}
		var src []byte
		for _, f := range files {
			if f.Path == te.File {
				src = f.Data[te.Offset : te.Offset+te.Length]
			}
		}
		g := got[te.Name]
		if g.SHA != sha(src) || g.DType != te.DType || fmt.Sprint(g.Shape) != fmt.Sprint(te.Shape) {
			t.Errorf("%s: subset entry %+v differs from the source", te.Name, g)
		}
	}
}

// hostile builds a file whose 8-byte prefix declares n and whose header is js.
func hostile(n uint64, js string, tail int) []byte {
	b := make([]byte, 8, 8+len(js)+tail)
	binary.LittleEndian.PutUint64(b, n)
	b = append(b, js...)
	return append(b, make([]byte, tail)...)
}

func TestHostileHeadersGetClearErrors(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	cases := map[string][]byte{
		"huge.safetensors": hostile(100<<30, "{}", 64),
		"past-eof.safetensors": func() []byte {
			js := `{"w":{"dtype":"F32","shape":[1000],"data_offsets":[0,4000]}}`
			return hostile(uint64(len(js)), js, 16)
		}(),
		"nested.safetensors": func() []byte {
			js := `{"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}}`
			return hostile(uint64(len(js)), js, 0)
		}(),
		"notjson.safetensors": hostile(4, "nope", 0),
		"short.safetensors":   {1, 2, 3},
		"dup.safetensors": func() []byte {
			js := `{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`
			return hostile(uint64(len(js)), js, 2)
		}(),
	}
	var fs []hubtest.File
	for p, b := range cases {
		fs = append(fs, hubtest.File{Path: p, Data: b})
	}
	good := hubtest.Safetensors([]hubtest.Tensor{{Name: "ok", DType: "U8", Shape: []int64{3}, Data: []byte{1, 2, 3}}}, nil)
	fs = append(fs, hubtest.File{Path: "good.safetensors", Data: good})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: fs})
	for p := range cases {
		resp, body := e.Do(http.MethodGet, "/models/org/model/tensors?file="+p)
		var msg struct{ Error string }
		json.Unmarshal(body, &msg)
		t.Logf("%s → %d %s", p, resp.StatusCode, msg.Error)
		if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Error-Code") != "InvalidSafetensors" || !strings.Contains(msg.Error, p) {
			t.Errorf("%s: %d %q, want 502 InvalidSafetensors naming the file", p, resp.StatusCode, msg.Error)
		}
		// The server keeps serving.
		if resp, b := e.Do(http.MethodGet, "/models/org/model/tensors/ok?file=good.safetensors"); resp.StatusCode != 200 || !bytes.Equal(b, []byte{1, 2, 3}) {
			t.Fatalf("after %s the server stopped serving: %d", p, resp.StatusCode)
		}
	}
	// The huge header must not have been fetched.
	if _, n := cdnStats(e.Hub, "huge.safetensors"); n > 128<<10 {
		t.Errorf("a header claiming 100 GB made the proxy fetch %d bytes", n)
	}
}

// An index naming thousands of missing shards costs a handful of upstream
// requests, not one per shard, and asking again costs none: the first
// missing shard ends the listing, and its absence at the commit is kept.
func TestIndexOfMissingShardsDoesNotFanOut(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	var wm strings.Builder
	wm.WriteString(`{"metadata":{},"weight_map":{`)
	for i := range 2000 {
		if i > 0 {
			wm.WriteString(",")
		}
		fmt.Fprintf(&wm, `"t%d":"model-%05d-of-02000.safetensors"`, i, i+1)
	}
	wm.WriteString("}}")
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{{Path: "model.safetensors.index.json", Data: []byte(wm.String())}}})
	e.Hub.ResetCounters()
	resp, _ := e.Do(http.MethodGet, "/models/org/model/tensors")
	if resp.StatusCode != 404 || resp.Header.Get("X-Error-Code") != "EntryNotFound" {
		t.Errorf("listing: %d %s", resp.StatusCode, resp.Header.Get("X-Error-Code"))
	}
	first := e.Hub.Counters().Requests
	t.Logf("2,000 missing shards: %d upstream requests", first)
	if first > 20 {
		t.Errorf("%d upstream requests for one listing", first)
	}
	e.Do(http.MethodGet, "/models/org/model/tensors")
	if again := e.Hub.Counters().Requests - first; again > 8 {
		t.Errorf("a second listing made %d more upstream requests", again)
	}
}
