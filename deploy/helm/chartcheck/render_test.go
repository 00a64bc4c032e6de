// Package chartcheck renders the hubproxy Helm chart and decodes every manifest
// strictly into the Kubernetes API types, so a misspelt field, a wrong type or a
// broken invariant (root user, token in a ConfigMap, missing probe) fails CI
// instead of failing at `kubectl apply` time — or, worse, being silently dropped
// by the API server.
//
// It holds only tests. With -rendered=<dir> it reads the output of
// `helm template` written by `make helm-check` (deploy/helm.mk); without it, it
// runs helm itself (lint, then template for every scenario), so a plain
// `go test ./...` never skips the chart.
package chartcheck

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// renderedDir is the one package-level variable: test flags must be registered
// before the testing package parses the command line.
var renderedDir = flag.String("rendered", "",
	"directory with `helm template` output, one <scenario>.yaml per scenario (see deploy/helm.mk); empty: run helm from this test")

const (
	// chartDir and configFile are relative to this package's directory, which
	// is the working directory of its tests.
	chartDir   = "../hubproxy"
	configFile = "../../../configs/hubproxy.yaml"

	// release, namespace and kubeVersion must match deploy/helm.mk. The
	// version is the cluster's as `helm install` would learn it (`helm
	// template` alone assumes v1.20); tests of older clusters pass their own.
	release     = "hubproxy"
	namespace   = "hubproxy"
	kubeVersion = "1.32.0"

	// helmEnv overrides defaultHelm, e.g. HUBPROXY_HELM=bin/helm or =helm.
	helmEnv     = "HUBPROXY_HELM"
	defaultHelm = "go run helm.sh/helm/v3/cmd/helm@v3.22.0"

	// defaultScenario renders the chart with its own values.yaml only.
	defaultScenario = "default"
	valuesSuffix    = "-values.yaml"
	// examplePrefix names the scenarios of examples/*-values.yaml, the files
	// the chart README tells users to start from.
	examplePrefix = "example-"
)

// scenario is one set of values the chart is rendered with: the defaults, or
// the defaults plus one ci/<name>-values.yaml or examples/<name>-values.yaml.
type scenario struct {
	name       string
	valuesFile string // absolute; "" for defaultScenario
}

// scenarios lists the default rendering plus one per ci/*-values.yaml and
// examples/*-values.yaml, the same set deploy/helm.mk renders.
func scenarios(t *testing.T) []scenario {
	t.Helper()
	out := []scenario{{name: defaultScenario}}
	for _, d := range []struct{ dir, prefix string }{{"ci", ""}, {"examples", examplePrefix}} {
		files, err := filepath.Glob(filepath.Join(chartDir, d.dir, "*"+valuesSuffix))
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(files)
		for _, f := range files {
			abs, err := filepath.Abs(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, scenario{name: d.prefix + strings.TrimSuffix(filepath.Base(f), valuesSuffix), valuesFile: abs})
		}
	}
	return out
}

// renderAll returns each scenario's rendered manifests, read from -rendered or
// produced by running helm. It fails (never skips) when neither works.
func renderAll(t *testing.T) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	for _, sc := range scenarios(t) {
		if *renderedDir != "" {
			b, err := os.ReadFile(filepath.Join(*renderedDir, sc.name+".yaml"))
			if err != nil {
				t.Fatalf("scenario %s: %v (does deploy/helm.mk render every ci/*%s?)", sc.name, err, valuesSuffix)
			}
			out[sc.name] = b
			continue
		}
		chart, err := filepath.Abs(chartDir)
		if err != nil {
			t.Fatal(err)
		}
		var extra []string
		if sc.valuesFile != "" {
			extra = []string{"--values", sc.valuesFile}
		}
		runHelm(t, append([]string{"lint", "--strict", "--kube-version", kubeVersion, chart}, extra...))
		out[sc.name] = runHelm(t, append([]string{"template", release, chart, "--namespace", namespace, "--kube-version", kubeVersion}, extra...))
	}
	return out
}

// runHelm runs the helm command ($HUBPROXY_HELM or `go run` of a pinned helm)
// and returns its stdout.
func runHelm(t *testing.T, args []string) []byte {
	t.Helper()
	out, err := tryHelm(args)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryHelm runs helm and returns its stdout, or an error carrying its stderr
// (where helm puts a schema violation or a template's fail message).
func tryHelm(args []string) ([]byte, error) {
	helm := strings.Fields(os.Getenv(helmEnv))
	if len(helm) == 0 {
		helm = strings.Fields(defaultHelm)
	}
	cmd := exec.Command(helm[0], append(helm[1:], args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", strings.Join(helm, " "), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// renderWith renders the chart with its defaults plus the given helm flags
// (--set, --values, --kube-version; the last --kube-version wins) and decodes
// the result strictly.
func renderWith(t *testing.T, flags ...string) []object {
	t.Helper()
	out, err := tryRender(flags...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(out)
	if err != nil {
		t.Fatalf("strict decoding:\n%v", err)
	}
	return objs
}

// tryRender is `helm template` of the chart with flags, the error carrying
// helm's message.
func tryRender(flags ...string) ([]byte, error) {
	chart, err := filepath.Abs(chartDir)
	if err != nil {
		return nil, err
	}
	args := append([]string{"template", release, chart, "--namespace", namespace, "--kube-version", kubeVersion}, flags...)
	return tryHelm(args)
}

// errEmptyRendering reports a scenario that rendered no object at all.
var errEmptyRendering = errors.New("rendering holds no Kubernetes object")

// splitDocuments cuts a multi-document YAML stream at its `---` lines and drops
// documents that hold only comments or blank lines.
func splitDocuments(stream []byte) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	for _, line := range bytes.SplitAfter(stream, []byte("\n")) {
		if string(bytes.TrimRight(line, " \t\r\n")) == "---" {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	if len(docs) == 0 {
		return nil, errEmptyRendering
	}
	return docs, nil
}

func hasContent(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if len(l) > 0 && l[0] != '#' {
			return true
		}
	}
	return false
}
