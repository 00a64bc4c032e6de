// Package spectest reads hubproxy's REST contract, api/openapi.yaml, for the
// tests that hold the code to it: the public listener's (internal/app,
// internal/server) and the admin listener's (internal/admin). One reader,
// so that each checks a body or an error row by the same rules. Only tests
// import it.
package spectest

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Path is api/openapi.yaml relative to a package directory two levels
// below the repository root (internal/<pkg>), where that package's tests
// run.
const Path = "../../api/openapi.yaml"

// Spec is the contract, parsed as plain YAML values.
type Spec struct {
	Doc map[string]any
}

// Load reads and parses the contract at Path.
func Load(t testing.TB) *Spec {
	t.Helper()
	data, err := os.ReadFile(Path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return &Spec{Doc: doc}
}

func (s *Spec) components(kind string) map[string]any {
	m, _ := Lookup(s.Doc, []string{"components", kind}).(map[string]any)
	return m
}

// Schema returns components.schemas[name], failing the test if the contract
// has no such schema.
func (s *Spec) Schema(t testing.TB, name string) map[string]any {
	t.Helper()
	m, ok := s.components("schemas")[name].(map[string]any)
	if !ok {
		t.Fatalf("api/openapi.yaml has no schema %s", name)
	}
	return m
}

// Lookup walks a parsed document along a JSON pointer's segments ("~1" is
// "/", "~0" is "~"); nil when there is nothing there.
func Lookup(v any, path []string) any {
	for _, seg := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		if v, ok = m[strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")]; !ok {
			return nil
		}
	}
	return v
}

// Conforms checks v against schema: every key of a closed object
// (additionalProperties: false) is a declared property, every required key
// is there, and nested objects and arrays conform in turn. It reports each
// difference by path, without stopping.
func (s *Spec) Conforms(t testing.TB, schema map[string]any, v any, path string) {
	t.Helper()
	if ref, ok := schema["$ref"].(string); ok {
		schema = s.Schema(t, strings.TrimPrefix(ref, "#/components/schemas/"))
	}
	switch val := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		// Only a closed object lists every key.
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
			s.Conforms(t, sub, val[k], path+"."+k)
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
			s.Conforms(t, items, e, path+"[]")
		}
	}
}

// CheckErrorRule checks one row of an error table against the contract:
// it has a code (every error hubproxy raises itself says what went wrong
// in X-Error-Code, 5xx included), the code is in the X-Error-Code
// vocabulary (components.schemas.ErrorCode),
// and its status (unless 0: one the row takes from elsewhere) is one some
// operation documents by number (a "4XX" class, which relayed routes
// document, is not enough), or the code is a component response any URL
// may give (405 MethodNotAllowed).
func (s *Spec) CheckErrorRule(t testing.TB, name string, status int, code string) {
	t.Helper()
	var codes []string
	enum, _ := Lookup(s.Doc, []string{"components", "schemas", "ErrorCode", "enum"}).([]any)
	for _, c := range enum {
		codes = append(codes, c.(string))
	}
	if code == "" {
		t.Errorf("rule %q answers without an X-Error-Code", name)
	} else if !slices.Contains(codes, code) {
		t.Errorf("rule %q answers X-Error-Code %s, which components.schemas.ErrorCode does not list", name, code)
	}
	if _, shared := s.components("responses")[code]; shared || status == 0 {
		return
	}
	if !s.documentedStatuses()[strconv.Itoa(status)] {
		t.Errorf("rule %q answers %d, which no operation documents", name, status)
	}
}

// documentedStatuses is every status some operation documents a response
// for.
func (s *Spec) documentedStatuses() map[string]bool {
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
	walk(s.Doc["paths"])
	return documented
}

// GetJSON fetches url and decodes its body as JSON, failing the test if it
// is not JSON.
func GetJSON(t testing.TB, url string) any {
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
