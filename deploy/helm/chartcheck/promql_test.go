package chartcheck

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// vectorSelector is one metric a PromQL expression reads, with the label
// names its matchers test, and the value each equality matcher (label="v")
// asks for: a value the metric never carries matches nothing, as silently
// as a misspelt metric.
type vectorSelector struct {
	metric string
	labels []string
	equals map[string]string
}

// promqlWords are PromQL's keywords and aggregation operators: identifiers
// that never name a metric. Functions are told apart by the "(" after them.
var promqlWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "atan2": true, "inf": true, "nan": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}

// labelListWords are followed by a parenthesised list of label names.
var labelListWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// selectors lists the vector selectors of a PromQL expression. It is a
// lexer, not a parser: enough to find every metric name and matcher, and to
// refuse unbalanced brackets or an unterminated string, which Prometheus
// would refuse too.
func selectors(expr string) ([]vectorSelector, error) {
	var out []vectorSelector
	var depth []byte // open brackets
	i := 0
	skipSpace := func() {
		for i < len(expr) && unicode.IsSpace(rune(expr[i])) {
			i++
		}
	}
	ident := func() string {
		start := i
		for i < len(expr) && (expr[i] == '_' || expr[i] == ':' || unicode.IsLetter(rune(expr[i])) || (i > start && unicode.IsDigit(rune(expr[i])))) {
			i++
		}
		return expr[start:i]
	}
	skipString := func() error {
		q := expr[i]
		for i++; i < len(expr); i++ {
			if expr[i] == '\\' && q != '`' {
				i++
				continue
			}
			if expr[i] == q {
				i++
				return nil
			}
		}
		return errors.New("unterminated string")
	}
	// matchers reads {name op "value", ...} and returns the label names
	// and the values of the equality matchers.
	matchers := func() ([]string, map[string]string, string, error) {
		var labels []string
		var metric string
		var equals map[string]string
		i++ // {
		for {
			skipSpace()
			if i < len(expr) && expr[i] == '}' {
				i++
				return labels, equals, metric, nil
			}
			name := ident()
			if name == "" {
				return nil, nil, "", fmt.Errorf("label name expected at %q", expr[i:])
			}
			skipSpace()
			opStart := i
			for i < len(expr) && strings.ContainsRune("=!~", rune(expr[i])) {
				i++
			}
			op := expr[opStart:i]
			skipSpace()
			if i >= len(expr) || !strings.ContainsRune("\"'`", rune(expr[i])) {
				return nil, nil, "", fmt.Errorf("matcher value expected after %s", name)
			}
			start := i
			if err := skipString(); err != nil {
				return nil, nil, "", err
			}
			value := strings.Trim(expr[start:i], "\"'`")
			switch {
			case name == "__name__":
				metric = value
			case op == "=":
				if equals == nil {
					equals = map[string]string{}
				}
				equals[name] = value
				labels = append(labels, name)
			default:
				labels = append(labels, name)
			}
			skipSpace()
			if i < len(expr) && expr[i] == ',' {
				i++
			}
		}
	}
	for skipSpace(); i < len(expr); skipSpace() {
		ch := expr[i]
		switch {
		case ch == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case strings.ContainsRune("\"'`", rune(ch)):
			if err := skipString(); err != nil {
				return nil, err
			}
		case ch == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, errors.New("unclosed [")
			}
			i += end + 1
		case ch == '(':
			depth = append(depth, ch)
			i++
		case ch == ')':
			if len(depth) == 0 {
				return nil, errors.New("unbalanced )")
			}
			depth = depth[:len(depth)-1]
			i++
		case ch == '{':
			labels, equals, metric, err := matchers()
			if err != nil {
				return nil, err
			}
			if metric == "" {
				return nil, errors.New("a selector without a metric name")
			}
			out = append(out, vectorSelector{metric: metric, labels: labels, equals: equals})
		case ch == '_' || ch == ':' || unicode.IsLetter(rune(ch)):
			word := ident()
			skipSpace()
			next := byte(0)
			if i < len(expr) {
				next = expr[i]
			}
			switch {
			case labelListWords[word] && next == '(':
				end := strings.IndexByte(expr[i:], ')')
				if end < 0 {
					return nil, errors.New("unclosed label list")
				}
				i += end + 1
			case promqlWords[word] || next == '(':
				// an operator, a keyword or a function call
			case next == '{':
				labels, equals, _, err := matchers()
				if err != nil {
					return nil, err
				}
				out = append(out, vectorSelector{metric: word, labels: labels, equals: equals})
			default:
				out = append(out, vectorSelector{metric: word})
			}
		default: // numbers, durations after offset, operators, commas
			i++
			for i < len(expr) && (unicode.IsDigit(rune(expr[i])) || expr[i] == '.' || unicode.IsLetter(rune(expr[i]))) && unicode.IsDigit(rune(ch)) {
				i++
			}
		}
	}
	if len(depth) > 0 {
		return nil, errors.New("unbalanced (")
	}
	if len(out) == 0 {
		return nil, errors.New("names no metric")
	}
	return out, nil
}

// TestSelectors checks the lexer on the shapes the chart's alerts and
// dashboard use, so that a metric it misses cannot slip past the check.
func TestSelectors(t *testing.T) {
	type want struct {
		metric string
		labels []string
	}
	for _, tc := range []struct {
		expr string
		want []want
	}{
		{`max by (namespace, pod) (hubproxy_upstream_up{namespace="x"}) == 0`,
			[]want{{"hubproxy_upstream_up", []string{"namespace"}}}},
		{`sum by (namespace, pod, reason) (rate(a_total{ns="x"}[15m])) / on (namespace, pod) group_left sum by (namespace, pod) (rate(b_total[15m])) > 0.1`,
			[]want{{"a_total", []string{"ns"}}, {"b_total", nil}}},
		{`(x_bytes + y_bytes) > z_bytes and z_bytes > 0`,
			[]want{{"x_bytes", nil}, {"y_bytes", nil}, {"z_bytes", nil}, {"z_bytes", nil}}},
		{`histogram_quantile(0.95, sum by (le) (rate(h_bucket{pod=~"a,b}"}[5m]))) offset 1h`,
			[]want{{"h_bucket", []string{"pod"}}}},
		{`sum(rate(m{result="hit"}[1h])) / sum(rate(m[1h]))`,
			[]want{{"m", []string{"result"}}, {"m", nil}}},
		{`{__name__="by_name", job="j"}`, []want{{"by_name", []string{"job"}}}},
		{`min_over_time(g[15m:1m]) > 0 unless count(g) by (pod) < 2`, []want{{"g", nil}, {"g", nil}}},
	} {
		got, err := selectors(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if !slices.EqualFunc(got, tc.want, func(a vectorSelector, b want) bool { return a.metric == b.metric && slices.Equal(a.labels, b.labels) }) {
			t.Errorf("%s:\n got %v\nwant %v", tc.expr, got, tc.want)
		}
	}
	got, err := selectors(`sum(rate(m{result="hit", pod=~"a|b", code!="500"}[1h])) / sum(rate(m{}[1h]))`)
	if err != nil || len(got) != 2 || !maps.Equal(got[0].equals, map[string]string{"result": "hit"}) || got[1].equals != nil {
		t.Errorf("equality matchers: %+v, %v; want result=hit on the first selector only", got, err)
	}
	for _, bad := range []string{`sum(rate(m[5m])`, `m{a="b}`, `rate(m[5m)`, `vector(1)`, `{job="x"}`} {
		if _, err := selectors(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
