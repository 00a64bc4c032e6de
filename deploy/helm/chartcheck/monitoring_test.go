package chartcheck

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// targetLabels are labels Prometheus itself attaches to scraped series
// (from the target), which expressions may match on.
var targetLabels = []string{"namespace", "pod", "job", "instance", "container", "service", "endpoint"}

// exportedMetrics is what a /metrics page exposes: series name → label
// name → the values seen.
type exportedMetrics map[string]map[string][]string

// labelNames lists the labels metric carries.
func (e exportedMetrics) labelNames(metric string) []string {
	return slices.Sorted(maps.Keys(e[metric]))
}

// scrapedMetrics builds hubproxy in process against a fake hub, with a
// shared store (file:// on a temporary directory, so the store's metrics
// exist as on a cluster's nodes), sends it a little traffic (metric families
// with labels appear only once used), and returns every series name its
// /metrics exposes with the label values each carries, and the series of
// families whose help text marks them deprecated. Histograms expose
// name_bucket, name_sum and name_count.
func scrapedMetrics(t *testing.T) (exported exportedMetrics, deprecated map[string]bool) {
	t.Helper()
	hub := hubtest.NewT(t, hubtest.Options{})
	hub.AddRepo(hubtest.RepoSpec{ID: bootRepo, Files: []hubtest.File{
		{Path: bootFile, Data: []byte(bootData)},
		{Path: "model.safetensors", Data: hubtest.RandomBytes(1, 3<<20)},
	}})
	cfg := app.Defaults()
	cfg.Upstream, cfg.CacheDir, cfg.AdminListen = hub.URL, t.TempDir(), ""
	cfg.SharedStore, cfg.SharedStoreSecret = "file://"+t.TempDir(), bootStoreSecret
	h, err := app.Build(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	srv := httptest.NewServer(h.Main)
	t.Cleanup(srv.Close)
	// The boot file twice: its second read is a cache hit.
	for _, p := range []string{bootFile, "model.safetensors", "missing.json", bootFile} {
		resp, err := http.Get(srv.URL + "/" + bootRepo + "/resolve/main/" + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := exportedMetrics{}
	deprecated = map[string]bool{}
	add := func(name string, labels []*dto.LabelPair, extra ...string) {
		if out[name] == nil {
			out[name] = map[string][]string{}
		}
		for _, l := range labels {
			if vs := out[name][l.GetName()]; !slices.Contains(vs, l.GetValue()) {
				out[name][l.GetName()] = append(vs, l.GetValue())
			}
		}
		for _, l := range extra {
			out[name][l] = append(out[name][l], "") // bucket bounds and quantiles: any value
		}
	}
	for name, f := range families {
		series := []string{name}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			series = []string{name + "_bucket", name + "_sum", name + "_count"}
		case dto.MetricType_SUMMARY:
			series = []string{name, name + "_sum", name + "_count"}
		}
		for _, m := range f.GetMetric() {
			labels := m.GetLabel()
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", labels, "le")
				add(name+"_sum", labels)
				add(name+"_count", labels)
			case dto.MetricType_SUMMARY:
				add(name, labels, "quantile")
				add(name+"_sum", labels)
				add(name+"_count", labels)
			default:
				add(name, labels)
			}
		}
		// internal/metrics starts the help of a series it keeps for one
		// last release with this notice (its tests hold it to that).
		if strings.HasPrefix(f.GetHelp(), "Deprecated") {
			for _, s := range series {
				deprecated[s] = true
			}
		}
	}
	return out, deprecated
}

// grafanaVar matches Grafana's variables: $__rate_interval stands for a range,
// the others ($namespace, ${pod}) only appear inside matcher strings.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)\}?`)

func grafanaToPromQL(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__") {
			return "5m"
		}
		return "x"
	})
}

// labelValuesQuery matches a Grafana variable query label_values(selector, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// dashboardQueries walks a dashboard's panels (rows nest theirs) and variables
// and returns every PromQL expression, keyed by where it is.
func dashboardQueries(t *testing.T, raw string) map[string]string {
	t.Helper()
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var dash struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(raw), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	out := map[string]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for i, tg := range p.Targets {
				out[fmt.Sprintf("panel %q target %d", p.Title, i)] = grafanaToPromQL(tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			json.Unmarshal(v.Query, &q.Query) // older dashboards: a bare string
		}
		m := labelValuesQuery.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, q.Query)
			continue
		}
		out["variable "+v.Name] = grafanaToPromQL(m[1])
	}
	return out
}

// TestAlertsAndDashboardNameRealMetrics renders the PrometheusRule and the
// dashboard and checks every expression against the metrics a real hubproxy
// (with a shared store) exposes: an alert on a misspelt or removed metric,
// label or label value never fires, and says nothing about it; one on a
// deprecated metric stops working a release later. Names that are missing
// are listed together.
func TestAlertsAndDashboardNameRealMetrics(t *testing.T) {
	objs := renderWith(t, "--set", "prometheusRule.enabled=true", "--set", "grafanaDashboard.enabled=true")
	exprs := map[string]string{}
	rules := ofType[PrometheusRule](objs)
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules, want 1", len(rules))
	}
	alerts := map[string]bool{}
	for _, g := range rules[0].Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || alerts[r.Alert] {
				t.Errorf("rule %q: want a unique alert name", r.Alert)
			}
			alerts[r.Alert] = true
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: want a severity label, a summary and a description", r.Alert)
			}
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	var dashboards []string
	for _, cm := range ofType[corev1.ConfigMap](objs) {
		if cm.Labels["grafana_dashboard"] != "" {
			dashboards = append(dashboards, cm.Data["hubproxy.json"])
		}
	}
	if len(dashboards) != 1 {
		t.Fatalf("%d dashboard ConfigMaps carrying grafana_dashboard, want 1", len(dashboards))
	}
	maps.Copy(exprs, dashboardQueries(t, dashboards[0]))

	exported, deprecated := scrapedMetrics(t)
	missing := map[string][]string{} // metric → where it is used
	for _, where := range slices.Sorted(maps.Keys(exprs)) {
		sels, err := selectors(exprs[where])
		if err != nil {
			t.Errorf("%s: %v\n%s", where, err, exprs[where])
			continue
		}
		for _, s := range sels {
			labels, ok := exported[s.metric]
			if !ok {
				missing[s.metric] = append(missing[s.metric], where)
				continue
			}
			if deprecated[s.metric] {
				// It goes away in the next release: a panel or alert on it
				// would then go blank or silent.
				t.Errorf("%s: %s is deprecated (its help names the series to use)", where, s.metric)
			}
			for _, l := range s.labels {
				if _, ok := labels[l]; !ok && !slices.Contains(targetLabels, l) {
					t.Errorf("%s: %s has no label %q (it has %v)", where, s.metric, l, exported.labelNames(s.metric))
				}
			}
			for l, v := range s.equals {
				if vs, ok := labels[l]; ok && !slices.Contains(vs, v) {
					t.Errorf("%s: %s{%s=%q} is never exported (its %s values: %q)", where, s.metric, l, v, l, vs)
				}
			}
		}
	}
	if len(missing) > 0 {
		names := slices.Sorted(maps.Keys(missing))
		for _, n := range names {
			t.Logf("%s is used by %v", n, missing[n])
		}
		t.Errorf("metrics hubproxy does not export: %v", names)
	}
}

// TestStoreAlertThresholds: the shared store's alerts take their thresholds
// from prometheusRule, so an operator can tune them without editing the rule.
func TestStoreAlertThresholds(t *testing.T) {
	objs := renderWith(t, "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.storeDownFor=2m",
		"--set-json", "prometheusRule.storeErrorRatioAbove=0.25", "--set-json", "prometheusRule.storeTakeoverRatioAbove=0.5")
	rules := ofType[PrometheusRule](objs)
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules, want 1", len(rules))
	}
	want := map[string]struct{ expr, dur string }{
		"HubproxyStoreDown":            {"hubproxy_store_up", "2m"},
		"HubproxyStoreErrors":          {"> 0.25", "10m"},
		"HubproxyStoreClaimsTakenOver": {"> 0.5", "15m"},
	}
	for _, g := range rules[0].Spec.Groups {
		for _, r := range g.Rules {
			w, ok := want[r.Alert]
			if !ok {
				continue
			}
			delete(want, r.Alert)
			if !strings.Contains(r.Expr, w.expr) || r.For != w.dur {
				t.Errorf("%s: for %q, expr %q; want for %q and %q in the expr", r.Alert, r.For, r.Expr, w.dur, w.expr)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("alerts missing: %v", slices.Sorted(maps.Keys(want)))
	}
}
