package server

import (
	"testing"

	"github.com/hubproxy/hubproxy/internal/spectest"
)

// Every code the error table can answer is in the contract's X-Error-Code
// vocabulary, and every fixed status it answers is one the contract
// documents somewhere, so the table and api/openapi.yaml cannot drift apart.
func TestErrorTableMatchesTheContract(t *testing.T) {
	spec := spectest.Load(t)
	seen := map[string]bool{}
	for _, r := range errorRules {
		if seen[r.name] {
			t.Errorf("two rules are named %q", r.name)
		}
		seen[r.name] = true
		spec.CheckErrorRule(t, r.name, r.status, r.code)
	}
}
