package admin_test

import (
	"net/http"
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
