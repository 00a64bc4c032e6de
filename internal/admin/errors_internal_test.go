package admin

import (
	"testing"

	"github.com/hubproxy/hubproxy/internal/spectest"
)

// Every code the admin listener's own rows answer is in the contract's
// X-Error-Code vocabulary, and every status they answer is one the
// contract documents somewhere, so these rows and api/openapi.yaml cannot
// drift apart. internal/server checks the rows it shares with the public
// listener the same way (TestErrorTableMatchesTheContract there).
func TestErrorTableMatchesTheContract(t *testing.T) {
	spec := spectest.Load(t)
	seen := map[string]bool{}
	for _, r := range errorRules {
		if seen[r.Name] {
			t.Errorf("two rules are named %q", r.Name)
		}
		seen[r.Name] = true
		if r.Match == nil || r.Status == 0 || r.Code == "" {
			t.Errorf("rule %q: match, status and code are all required", r.Name)
		}
		spec.CheckErrorRule(t, r.Name, r.Status, r.Code)
	}
}
