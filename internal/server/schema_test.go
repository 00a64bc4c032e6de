package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// specSchemas loads the components.schemas of api/openapi.yaml.
func specSchemas(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc["components"].(map[string]any)["schemas"].(map[string]any)
}

// conforms checks v against schema: every key of an object is a declared
// property (when additionalProperties is false), every required key is
// there, and nested objects and arrays conform in turn. It reports each
// difference by path.
func conforms(t *testing.T, schemas map[string]any, schema map[string]any, v any, path string) {
	t.Helper()
	if ref, ok := schema["$ref"].(string); ok {
		schema = schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
	switch val := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		// Only a closed object (additionalProperties: false) lists every key.
		if open, _ := schema["additionalProperties"].(bool); open || schema["additionalProperties"] == nil || props == nil {
			return
		}
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("%s.%s: not in the contract", path, k)
				continue
			}
			conforms(t, schemas, sub, val[k], path+"."+k)
		}
		req, _ := schema["required"].([]any)
		for _, r := range req {
			if _, ok := val[r.(string)]; !ok {
				t.Errorf("%s: required %s missing", path, r)
			}
		}
	case []any:
		items, _ := schema["items"].(map[string]any)
		for _, e := range val {
			conforms(t, schemas, items, e, path+"[]")
		}
	}
}

func getJSON(t *testing.T, url string) any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: not JSON: %s", url, b)
	}
	return v
}

// The bodies of the typed endpoints are what the contract says, key for key:
// one snake_case style, nothing undocumented, nothing required missing.
func TestBodiesMatchTheContract(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	st := &fakeStager{leases: map[string]*gpu.Lease{}, mem: map[string][]byte{}}
	admin := newAdmin(t, e, st)
	e.hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{
		{Path: "model.safetensors", Data: hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "F32", Shape: []int64{256}}}, nil)},
	}})
	resp, err := http.Post(admin.URL+"/gpu/stage", "application/json", strings.NewReader(`{"repo":"org/model","names":["w"]}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stage: %v %v", resp, err)
	}
	resp.Body.Close()
	schemas := specSchemas(t)
	op := operatorAdmin(t, e) // over TCP nobody may list leases
	for url, schema := range map[string]string{
		e.proxy.URL + "/readyz":    "Readiness",
		admin.URL + "/cache/stats": "CacheStats",
		admin.URL + "/gpu/devices": "GPUDevices",
		op + "/gpu/leases":         "GPULeases",
	} {
		conforms(t, schemas, schemas[schema].(map[string]any), getJSON(t, url), schema)
	}
}
