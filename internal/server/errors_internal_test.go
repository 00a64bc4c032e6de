package server

import (
	"errors"
	"net/http"
	"testing"

	"github.com/hubproxy/hubproxy/internal/spectest"
)

// Every code the error table can answer is in the contract's X-Error-Code
// vocabulary, and every fixed status it answers is one the contract
// documents somewhere, so the table and api/openapi.yaml cannot drift apart.
// Every rule has a code of its own (a client tells a 502 for a hash
// mismatch from one for a timeout by it), except the relayed hub answers,
// which keep the hub's; the fallback for an unknown error has one too.
func TestErrorTableMatchesTheContract(t *testing.T) {
	spec := spectest.Load(t)
	seen := map[string]bool{}
	for _, r := range errorRules {
		if seen[r.name] {
			t.Errorf("two rules are named %q", r.name)
		}
		seen[r.name] = true
		if r.relayed {
			if r.code != "" {
				t.Errorf("rule %q relays the hub's code but sets one of its own", r.name)
			}
			continue
		}
		spec.CheckErrorRule(t, r.name, r.status, r.code)
	}
	he := toHTTPError(errorRules, errors.New("something unforeseen"))
	if he.status != http.StatusInternalServerError {
		t.Fatalf("an unknown error answers %d, want 500", he.status)
	}
	spec.CheckErrorRule(t, "internal error (fallback)", he.status, he.code)
}
