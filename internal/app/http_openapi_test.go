package app_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/server"
	"github.com/hubproxy/hubproxy/internal/spectest"
)

// specPath is api/openapi.yaml, relative to this package's directory (the
// working directory of its tests).
const specPath = "../../api/openapi.yaml"

var specMethods = []string{"get", "head", "post", "put", "patch", "delete", "options", "trace"}

type specParam struct {
	Ref  string `yaml:"$ref"`
	Name string `yaml:"name"`
	In   string `yaml:"in"`
}

type specOp struct {
	OperationID string               `yaml:"operationId"`
	Parameters  []specParam          `yaml:"parameters"`
	Responses   map[string]yaml.Node `yaml:"responses"`
	Relay       bool                 `yaml:"x-hubproxy-relay"`
}

type specPathItem struct {
	Parameters []specParam `yaml:"parameters"`
	Ops        map[string]specOp
}

// UnmarshalYAML keeps the method keys of a path item as operations.
func (p *specPathItem) UnmarshalYAML(n *yaml.Node) error {
	var raw map[string]yaml.Node
	if err := n.Decode(&raw); err != nil {
		return err
	}
	p.Ops = map[string]specOp{}
	for k, v := range raw {
		switch {
		case k == "parameters":
			if err := v.Decode(&p.Parameters); err != nil {
				return err
			}
		case slices.Contains(specMethods, k):
			var op specOp
			if err := v.Decode(&op); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			p.Ops[strings.ToUpper(k)] = op
		}
	}
	return nil
}

type spec struct {
	OpenAPI    string                  `yaml:"openapi"`
	Paths      map[string]specPathItem `yaml:"paths"`
	Components struct {
		Parameters map[string]specParam `yaml:"parameters"`
		Schemas    map[string]struct {
			Enum []string `yaml:"enum"`
		} `yaml:"schemas"`
	} `yaml:"components"`
	raw any // the whole document, for the $ref walk
}

func loadSpec(t *testing.T) *spec {
	t.Helper()
	data, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var s spec
	if err := yaml.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s does not parse: %v", specPath, err)
	}
	if err := yaml.Unmarshal(data, &s.raw); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.OpenAPI, "3.1") {
		t.Fatalf("openapi %q, want 3.1.x", s.OpenAPI)
	}
	return &s
}

// params returns the parameters in effect for an operation, $refs resolved.
func (s *spec) params(t *testing.T, pattern, method string) []specParam {
	t.Helper()
	item := s.Paths[pattern]
	var out []specParam
	for _, p := range append(slices.Clone(item.Parameters), item.Ops[method].Parameters...) {
		if p.Ref != "" {
			name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/")
			c, found := s.Components.Parameters[name]
			if !ok || !found {
				t.Fatalf("%s %s: unresolvable parameter %s", method, pattern, p.Ref)
			}
			p = c
		}
		out = append(out, p)
	}
	return out
}

func hasParam(ps []specParam, in, name string) bool {
	return slices.ContainsFunc(ps, func(p specParam) bool { return p.In == in && strings.EqualFold(p.Name, name) })
}

// documents reports whether an operation documents status. Only a relay
// may cover it by its class ("4XX") or "default": the statuses hubproxy
// answers itself, and the hub statuses it maps, must be listed one by one.
func (o specOp) documents(status int) bool {
	keys := []string{strconv.Itoa(status)}
	if o.Relay {
		keys = append(keys, fmt.Sprintf("%dXX", status/100), "default")
	}
	for _, k := range keys {
		if _, ok := o.Responses[k]; ok {
			return true
		}
	}
	return false
}

func (s *spec) errorCodes(t *testing.T) []string {
	t.Helper()
	codes := s.Components.Schemas["ErrorCode"].Enum
	if len(codes) == 0 {
		t.Fatal("components.schemas.ErrorCode has no enum")
	}
	return codes
}

func routeKey(method, pattern string) string { return method + " " + pattern }

func TestOpenAPIMatchesRoutes(t *testing.T) {
	s := loadSpec(t)
	inSpec := map[string]bool{}
	opIDs := map[string]string{}
	for pattern, item := range s.Paths {
		if len(item.Ops) == 0 {
			t.Errorf("path %s has no operations", pattern)
		}
		for m, op := range item.Ops {
			inSpec[routeKey(m, pattern)] = true
			if op.OperationID == "" {
				t.Errorf("%s %s: no operationId", m, pattern)
			} else if prev, dup := opIDs[op.OperationID]; dup {
				t.Errorf("operationId %s used by %s and %s %s", op.OperationID, prev, m, pattern)
			}
			opIDs[op.OperationID] = routeKey(m, pattern)
			if len(op.Responses) == 0 {
				t.Errorf("%s %s: no responses", m, pattern)
			}
			// Every {name} in the template is a declared path parameter,
			// and every declared path parameter is in the template.
			ps := s.params(t, pattern, m)
			for _, name := range templateParams(pattern) {
				if !hasParam(ps, "path", name) {
					t.Errorf("%s %s: {%s} is not declared as a path parameter", m, pattern, name)
				}
			}
			for _, p := range ps {
				if p.In == "path" && !slices.Contains(templateParams(pattern), p.Name) {
					t.Errorf("%s %s: path parameter %q is not in the template", m, pattern, p.Name)
				}
			}
		}
	}
	inTable := map[string]bool{}
	for _, r := range append(append([]server.Route{}, server.Routes...), admin.Routes...) {
		k := routeKey(r.Method, r.Pattern)
		if inTable[k] {
			t.Errorf("server.Routes lists %s twice", k)
		}
		inTable[k] = true
		if r.Method != strings.ToUpper(r.Method) || !strings.HasPrefix(r.Example, "/") {
			t.Errorf("server.Routes entry %+v: method must be upper case, example a path", r)
		}
	}
	for _, k := range sortedKeys(inTable) {
		if !inSpec[k] {
			t.Errorf("%s is in server.Routes but not in %s", k, specPath)
		}
	}
	for _, k := range sortedKeys(inSpec) {
		if !inTable[k] {
			t.Errorf("%s is in %s but not in server.Routes", k, specPath)
		}
	}
	// No mapping key holds a space: that is the mark of an unquoted
	// description with a comma in a flow mapping ({description: a, b}).
	walkKeys(s.raw, func(k string) {
		if strings.Contains(k, " ") {
			t.Errorf("mapping key %q: an unquoted string split by a comma?", k)
		}
	})
	// Every $ref points at something that exists.
	walkRefs(s.raw, func(ref string) {
		if !strings.HasPrefix(ref, "#/") || spectest.Lookup(s.raw, strings.Split(ref[2:], "/")) == nil {
			t.Errorf("unresolvable $ref %q", ref)
		}
	})
}

var templateParam = regexp.MustCompile(`\{([^}]+)\}`)

func templateParams(pattern string) []string {
	var out []string
	for _, m := range templateParam.FindAllStringSubmatch(pattern, -1) {
		out = append(out, m[1])
	}
	return out
}

func walkRefs(v any, f func(string)) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			if s, ok := c.(string); ok && k == "$ref" {
				f(s)
			}
			walkRefs(c, f)
		}
	case []any:
		for _, c := range t {
			walkRefs(c, f)
		}
	}
}

func walkKeys(v any, f func(string)) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			f(k)
			walkKeys(c, f)
		}
	case []any:
		for _, c := range t {
			walkKeys(c, f)
		}
	}
}

// routesEnv is a fake hub holding a repo for every example in server.Routes.
func routesEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, hubtest.Options{}, nil)
	weights := hubtest.Safetensors([]hubtest.Tensor{
		{Name: "embed.weight", DType: "F32", Shape: []int64{4, 4}},
		{Name: "lm_head.weight", DType: "F32", Shape: []int64{4, 4}},
	}, map[string]string{"format": "pt"})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/model", Files: []hubtest.File{
		{Path: "config.json", Data: []byte(`{"model_type":"gpt2"}`)},
		{Path: "model.safetensors", Data: weights},
	}})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "gpt2", Files: []hubtest.File{
		{Path: "config.json", Data: []byte(`{"model_type":"gpt2"}`)},
	}})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Dataset, ID: "org/dataset", Files: []hubtest.File{
		{Path: "data/train.csv", Data: []byte("a,b\n1,2\n")},
	}})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Space, ID: "org/space", Files: []hubtest.File{
		{Path: "app.py", Data: []byte("print('hi')\n")},
	}})
	return e
}

type routeAnswer struct {
	status int
	header http.Header
	body   string
}

// sendRoute makes one request; methods that carry a body send a paths-info form.
func sendRoute(t *testing.T, e *env, method, path string, hdr ...string) routeAnswer {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		body = strings.NewReader(url.Values{"paths": {"config.json"}, "expand": {"False"}}.Encode())
	}
	req, err := http.NewRequest(method, e.Proxy.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return routeAnswer{resp.StatusCode, resp.Header, string(b)}
}

// missingRepo rewrites an example to name a repo the hub does not hold, or
// returns "" when the example names none of the fixture's repos.
func missingRepo(example string) string {
	path, query, _ := strings.Cut(example, "?")
	for _, id := range []string{"org/model", "org/dataset", "org/space"} {
		if p, ok := strings.CutSuffix(path, "/"+id); ok {
			return withQuery(p+"/org/missing", query)
		}
		if strings.Contains(path, "/"+id+"/") {
			return withQuery(strings.Replace(path, "/"+id+"/", "/org/missing/", 1), query)
		}
	}
	return ""
}

// missingRevision rewrites an example's revision "main" to one the hub does
// not hold, or returns "" when it names none.
func missingRevision(example string) string {
	path, query, _ := strings.Cut(example, "?")
	switch {
	case strings.Contains(query, "revision=main"):
		return path + "?" + strings.Replace(query, "revision=main", "revision=nobranch", 1)
	case strings.Contains(path, "/main/"):
		return withQuery(strings.Replace(path, "/main/", "/nobranch/", 1), query)
	case strings.HasSuffix(path, "/main"):
		return withQuery(strings.TrimSuffix(path, "main")+"nobranch", query)
	}
	return ""
}

func withQuery(path, query string) string {
	if query == "" {
		return path
	}
	return path + "?" + query
}

// TestEveryRouteIsServedAsDocumented sends each route's example (and a few
// probes: Range and If-None-Match where the spec declares them, a missing
// repo, a missing revision)
// to hubproxy over a fake hub. No example may fall through to "no such
// route" or a 405 of hubproxy's own, and every status seen must be
// documented for its operation.
func TestEveryRouteIsServedAsDocumented(t *testing.T) {
	s := loadSpec(t)
	e := routesEnv(t)
	codes := s.errorCodes(t)

	for i, r := range server.Routes {
		op, ok := s.Paths[r.Pattern].Ops[r.Method]
		if !ok {
			continue // TestOpenAPIMatchesRoutes names it
		}
		ps := s.params(t, r.Pattern, r.Method)
		name := r.Method + " " + r.Example
		u, err := url.Parse(r.Example)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for k := range u.Query() {
			if !op.Relay && !hasParam(ps, "query", k) {
				t.Errorf("%s: query parameter %q is not documented for %s %s", name, k, r.Method, r.Pattern)
			}
		}

		var seen []string
		check := func(what string, a routeAnswer) {
			t.Helper()
			seen = append(seen, fmt.Sprintf("%s %d %s", what, a.status, a.header.Get("X-Error-Code")))
			if a.status == http.StatusNotFound && a.header.Get("X-Error-Code") == "EntryNotFound" && strings.Contains(a.body, "no such route") {
				t.Errorf("%s (%s): hubproxy answered \"no such route\"", name, what)
			}
			if !op.documents(a.status) {
				t.Errorf("%s (%s): status %d is not documented for %s %s (body %.200q)", name, what, a.status, r.Method, r.Pattern, a.body)
			}
			if c := a.header.Get("X-Error-Code"); c != "" && !slices.Contains(codes, c) {
				t.Errorf("%s (%s): X-Error-Code %q is not in the spec's ErrorCode vocabulary", name, what, c)
			}
			if a.header.Get("X-Request-Id") == "" {
				t.Errorf("%s (%s): no X-Request-Id", name, what)
			}
		}

		id := fmt.Sprintf("openapi-%d", i)
		before := len(e.Hub.Requests())
		a := sendRoute(t, e, r.Method, r.Example, "X-Request-Id", id)
		check("example", a)
		if got := a.header.Get("X-Request-Id"); got != id {
			t.Errorf("%s: X-Request-Id %q, want the client's %q echoed", name, got, id)
		}
		if op.Relay {
			// A relayed routeAnswer is the hub's, 405 included; the hub must
			// have been asked.
			if !hubSaw(e.Hub.Requests()[before:], r.Method, u.EscapedPath()) {
				t.Errorf("%s: documented as relayed, but the hub never saw it", name)
			}
		} else {
			if a.status == http.StatusMethodNotAllowed {
				t.Errorf("%s: 405 (Allow %q)", name, a.header.Get("Allow"))
			}
			if a.status >= 300 && op.documents(http.StatusOK) {
				t.Errorf("%s: status %d (%.200q); the example must succeed", name, a.status, a.body)
			}
		}

		if hasParam(ps, "header", "Range") {
			a := sendRoute(t, e, r.Method, r.Example, "Range", "bytes=0-0")
			check("Range bytes=0-0", a)
			if a.status != http.StatusPartialContent || !strings.HasPrefix(a.header.Get("Content-Range"), "bytes 0-0/") {
				t.Errorf("%s with Range bytes=0-0: %d, Content-Range %q; want 206 bytes 0-0/…", name, a.status, a.header.Get("Content-Range"))
			}
			a = sendRoute(t, e, r.Method, r.Example, "Range", "bytes=1000000000-")
			check("Range past the end", a)
			if a.status != http.StatusRequestedRangeNotSatisfiable {
				t.Errorf("%s with a Range past the end: %d, want 416", name, a.status)
			}
		}
		if hasParam(ps, "header", "If-None-Match") {
			etag := sendRoute(t, e, r.Method, r.Example).header.Get("ETag")
			if etag == "" {
				t.Errorf("%s: documents If-None-Match but sends no ETag", name)
			} else {
				a := sendRoute(t, e, r.Method, r.Example, "If-None-Match", etag)
				check("If-None-Match", a)
				if a.status != http.StatusNotModified {
					t.Errorf("%s with If-None-Match %s: %d, want 304", name, etag, a.status)
				}
			}
		}
		if p := missingRepo(r.Example); p != "" {
			a := sendRoute(t, e, r.Method, p)
			check("missing repo", a)
			if !op.Relay && a.status < 400 {
				t.Errorf("%s for a missing repo: %d, want an error", name, a.status)
			}
		}
		if p := missingRevision(r.Example); p != "" {
			a := sendRoute(t, e, r.Method, p)
			check("missing revision", a)
			if !op.Relay && a.status < 400 {
				t.Errorf("%s at a missing revision: %d, want an error", name, a.status)
			}
		}
		t.Logf("%s: %s", name, strings.Join(seen, "; "))
	}
}

func hubSaw(reqs []hubtest.RequestRecord, method, path string) bool {
	return slices.ContainsFunc(reqs, func(r hubtest.RequestRecord) bool { return r.Method == method && r.Path == path })
}

// errorCodeLiteral finds X-Error-Code values in the source of the server
// and of the admin listener: the httpError code field, the admin's
// server.ErrorRule Code and fetch.StatusError's ErrorCode.
var errorCodeLiteral = regexp.MustCompile(`\b(?:code|Code|ErrorCode):\s*"([^"]+)"`)

// TestErrorCodesAreDocumented checks that every X-Error-Code hubproxy can
// send, its own or relayed from the hub, is in the spec's vocabulary, and
// that the vocabulary holds nothing else.
func TestErrorCodesAreDocumented(t *testing.T) {
	s := loadSpec(t)
	vocab := s.errorCodes(t)
	// The packages that answer with hubproxy's own codes: the server, the
	// JSON API it mounts, and the admin listener.
	var files []string
	for _, pkg := range []string{"server", "repoapi", "admin"} {
		src, err := filepath.Glob("../" + pkg + "/*.go")
		if err != nil || len(src) == 0 {
			t.Fatalf("internal/%s's source: %v", pkg, err)
		}
		files = append(files, src...)
	}
	produced := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range errorCodeLiteral.FindAllStringSubmatch(string(src), -1) {
			produced[m[1]] = true
		}
	}
	// The server raises at least these; fewer means the pattern has rotted.
	for _, c := range []string{"BadRequest", "EntryNotFound", "Offline", "InvalidSafetensors"} {
		if !produced[c] {
			t.Errorf("found no %q in internal/server's source; is errorCodeLiteral stale?", c)
		}
	}
	// Codes the hub sends and hubproxy relays unchanged.
	for _, c := range []string{hubtest.CodeRepoNotFound, hubtest.CodeGatedRepo, hubtest.CodeEntryNotFound, hubtest.CodeRevisionNotFound} {
		produced[c] = true
	}
	for _, c := range sortedKeys(produced) {
		if !slices.Contains(vocab, c) {
			t.Errorf("X-Error-Code %q can be sent but is not in the spec's ErrorCode enum", c)
		}
	}
	for _, c := range vocab {
		if !produced[c] {
			t.Errorf("the spec's ErrorCode enum lists %q, which nothing sends", c)
		}
	}
}
