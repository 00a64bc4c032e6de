package admin_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

func TestAdminStagesTensorsAndShards(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	files := hubtest.ShardedModel("model", 2, 3, 64, 48)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: files})
	st := &fakeStager{leases: map[string]*gpu.Lease{}, mem: map[string][]byte{}}
	adm := newAdmin(t, e, st)

	_, body := e.Do(http.MethodGet, "/models/org/model/tensors")
	var l listing
	json.Unmarshal(body, &l)
	src := func(name string) []byte {
		for _, te := range l.Tensors {
			if te.Name == name {
				for _, f := range files {
					if f.Path == te.File {
						return f.Data[te.Offset : te.Offset+te.Length]
					}
				}
			}
		}
		t.Fatalf("no tensor %s", name)
		return nil
	}
	post := func(req string) (int, admin.StageResponse, string) {
		resp, err := http.Post(adm.URL+"/gpu/stage", "application/json", strings.NewReader(req))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out admin.StageResponse
		json.Unmarshal(raw, &out)
		return resp.StatusCode, out, string(raw)
	}

	names := []string{l.Tensors[0].Name, l.Tensors[4].Name}
	code, out, raw := post(fmt.Sprintf(`{"repo":"org/model","names":["%s","%s"],"device":0}`, names[0], names[1]))
	if code != 200 || len(out.Tensors) != 2 {
		t.Fatalf("stage: %d %s", code, raw)
	}
	if b, _ := base64.StdEncoding.DecodeString(out.IPCHandle); len(b) != 64 {
		t.Errorf("ipc handle %q", out.IPCHandle)
	}
	mem := st.mem[out.Lease]
	for _, te := range out.Tensors {
		if !bytes.Equal(mem[te.Offset:te.Offset+te.Bytes], src(te.Name)) {
			t.Errorf("%s staged bytes differ", te.Name)
		}
	}
	// A tensor-parallel shard of every tensor under a prefix: rank 1 of 2 along dim 1.
	code, out, raw = post(`{"repo":"org/model","prefix":"` + strings.Split(l.Tensors[0].Name, ".")[0] + `","shard":"1:1/2","device":0}`)
	if code != 200 || len(out.Tensors) != len(l.Tensors) {
		t.Fatalf("stage shard: %d %s", code, raw)
	}
	mem = st.mem[out.Lease]
	for _, te := range out.Tensors {
		full := src(te.Name)
		var want bytes.Buffer
		for row := range 64 {
			want.Write(full[row*48*2+24*2 : (row+1)*48*2]) // BF16 columns 24..48
		}
		if fmt.Sprint(te.Shape) != "[64 24]" || !bytes.Equal(mem[te.Offset:te.Offset+te.Bytes], want.Bytes()) {
			t.Errorf("%s shard: shape %v, bytes equal %v", te.Name, te.Shape, bytes.Equal(mem[te.Offset:te.Offset+te.Bytes], want.Bytes()))
		}
	}
	// Leases list (to the operator: over TCP nobody can list) and release
	// (idempotent).
	if ids := leaseIDs(t, operatorAdmin(t, e)); len(ids) != 2 {
		t.Errorf("%d leases, want 2", len(ids))
	}
	for range 2 {
		req, _ := http.NewRequest(http.MethodDelete, adm.URL+"/gpu/leases/"+out.Lease, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("release: %v %d", err, resp.StatusCode)
		}
	}
	// Bad requests.
	for _, bad := range []string{`{"repo":"org/model","device":0}`, `{"repo":"../x","names":["a"]}`, `{"repo":"org/model","names":["nope"]}`, `{"repo":"org/model","names":["` + names[0] + `"],"device":7}`, `{"bogus":1}`} {
		if code, _, raw := post(bad); code < 400 || code >= 500 {
			t.Errorf("%s: %d %s, want a 4xx", bad, code, raw)
		}
	}
}

func TestAdminWithoutCUDA(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	c, err := gpu.Open(gpu.Options{DriverPath: "/nonexistent/libcuda.so.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	adm := newAdmin(t, e, c)
	resp, err := http.Get(adm.URL + "/gpu/devices")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Available bool
		Reason    string
	}
	json.NewDecoder(resp.Body).Decode(&d)
	resp.Body.Close()
	if d.Available || d.Reason == "" {
		t.Errorf("devices without CUDA: %+v", d)
	}
	resp, _ = http.Post(adm.URL+"/gpu/stage", "application/json", strings.NewReader(`{"repo":"org/model","names":["w"]}`))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Error-Code") != "GPUUnavailable" {
		t.Errorf("stage without CUDA: %d %s", resp.StatusCode, resp.Header.Get("X-Error-Code"))
	}
}

// The GPU stage route folds case like the public routes: a denied repo in
// another casing is refused before anything is staged.
func TestAdmissionStageFoldsCase(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, func(c *app.Config) { c.DenyRepos = []string{"org/model"} })
	st := newFakeStager()
	url := newAdmin(t, e, st).URL
	for _, repo := range []string{"org/model", "Org/Model", "ORG/MODEL"} {
		if resp, out := postStage(t, url, `{"repo":"`+repo+`","names":["w"]}`); resp.StatusCode != http.StatusForbidden {
			t.Errorf("stage %s: %d %v, want 403", repo, resp.StatusCode, out)
		}
	}
	if len(st.staged) != 0 {
		t.Errorf("%d stagings reached the stager, want 0", len(st.staged))
	}
}
