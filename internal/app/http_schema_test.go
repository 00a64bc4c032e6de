package app_test

import (
	"testing"

	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/spectest"
)

// The bodies of the typed endpoints are what the contract says, key for key:
// one snake_case style, nothing undocumented, nothing required missing. The
// admin listener's are checked in internal/admin
// (TestAdminBodiesMatchTheContract).
func TestBodiesMatchTheContract(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	spec := spectest.Load(t)
	for url, schema := range map[string]string{
		e.Proxy.URL + "/readyz": "Readiness",
	} {
		spec.Conforms(t, spec.Schema(t, schema), spectest.GetJSON(t, url), schema)
	}
}
