package server

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Every code the error table can answer is in the contract's X-Error-Code
// vocabulary, and every fixed status it answers is one the contract
// documents somewhere, so the table and api/openapi.yaml cannot drift apart.
func TestErrorTableMatchesTheContract(t *testing.T) {
	data, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	var codes []string
	for _, c := range schemas["ErrorCode"].(map[string]any)["enum"].([]any) {
		codes = append(codes, c.(string))
	}
	documented := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch m := v.(type) {
		case map[string]any:
			if rs, ok := m["responses"].(map[string]any); ok {
				for status := range rs {
					documented[status] = true
				}
			}
			for _, c := range m {
				walk(c)
			}
		case []any:
			for _, c := range m {
				walk(c)
			}
		}
	}
	walk(doc["paths"])
	// An answer any URL can give (405) is documented once, as a component
	// response named after its code.
	components := doc["components"].(map[string]any)["responses"].(map[string]any)
	seen := map[string]bool{}
	for _, r := range errorRules {
		if seen[r.name] {
			t.Errorf("two rules are named %q", r.name)
		}
		seen[r.name] = true
		if r.code != "" && !slices.Contains(codes, r.code) {
			t.Errorf("rule %q answers X-Error-Code %s, which components.schemas.ErrorCode does not list", r.name, r.code)
		}
		_, shared := components[r.code]
		if r.status != 0 && !shared && !documented[strconv.Itoa(r.status)] && !documented[strings.TrimSuffix(strconv.Itoa(r.status), "0")+"X"] {
			t.Errorf("rule %q answers %d, which no operation documents", r.name, r.status)
		}
	}
}
