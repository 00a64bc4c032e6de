package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/spectest"
)

// The bodies of the admin API's typed endpoints are what the contract
// says, key for key: one snake_case style, nothing undocumented, nothing
// required missing. (Moved from internal/server's TestBodiesMatchTheContract,
// which keeps the public listener's.)
func TestAdminBodiesMatchTheContract(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	st := &fakeStager{leases: map[string]*gpu.Lease{}, mem: map[string][]byte{}}
	adm := newAdmin(t, e, st)
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{
		{Path: "model.safetensors", Data: hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "F32", Shape: []int64{256}}}, nil)},
	}})
	resp, err := http.Post(adm.URL+"/gpu/stage", "application/json", strings.NewReader(`{"repo":"org/model","names":["w"]}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stage: %v %v", resp, err)
	}
	resp.Body.Close()
	spec := spectest.Load(t)
	op := operatorAdmin(t, e) // over TCP nobody may list leases
	for url, schema := range map[string]string{
		adm.URL + "/cache/stats": "CacheStats",
		adm.URL + "/gpu/devices": "GPUDevices",
		op + "/gpu/leases":       "GPULeases",
	} {
		spec.Conforms(t, spec.Schema(t, schema), spectest.GetJSON(t, url), schema)
	}
}

// The admin router's own 404 and 405 answers take the shape of every other
// error, as the public listener's do.
func TestAdminRouterErrorsAreJSON(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	adm := httptest.NewServer(e.Admin)
	defer adm.Close()
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/nope", 404, "EntryNotFound"},
		{http.MethodPut, "/gpu/stage", 405, "MethodNotAllowed"},
		{http.MethodPost, "/gpu/devices", 405, "MethodNotAllowed"},
	} {
		req, _ := http.NewRequest(tc.method, adm.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("X-Error-Code") != tc.code || err != nil || body["error"] == "" ||
			resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s: %d %q %v %v", tc.method, tc.path, resp.StatusCode, resp.Header.Get("X-Error-Code"), body, err)
		}
		if tc.status == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
	}
}
