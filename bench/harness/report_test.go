package harness

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		r    float64
		b    Better
		want string
	}{
		{0.5, Lower, "hubproxy"},
		{2, Lower, "peer"},
		{0.5, Higher, "peer"},
		{2, Higher, "hubproxy"},
		{0.97, Lower, "tie"},
		{1.04, Higher, "tie"},
		{math.NaN(), Lower, "—"},
	} {
		if got := verdict(tc.r, tc.b); got != tc.want {
			t.Errorf("verdict(%v, %v) = %q, want %q", tc.r, tc.b, got, tc.want)
		}
	}
}

func TestCellAndSig(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want string
	}{
		{nil, "—"},
		{[]float64{2.5}, "2.500"},
		{[]float64{1234.4, 1300, 1100}, "1234 (1100–1300)"},
		{[]float64{0.01234, 0.01234}, "0.0123"},
		{[]float64{0}, "0"},
	} {
		if got := cell(summarize(tc.in)); got != tc.want {
			t.Errorf("cell(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func testReport() *Report {
	return &Report{
		Started:  time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
		Machine:  Machine{Host: "box/1", CPUs: 2, CPUModel: "CPU", MemBytes: 4 * GiB},
		Settings: []string{"mode: quick"},
		Measures: []Measure{
			{Scenario: 1, Title: "cold", Metric: "time", Unit: "s", Better: Lower, Headline: true,
				Samples: map[string][]float64{Hubproxy: {1, 2, 3}, Nginx: {4}, Direct: {8}}},
			{Scenario: 7, Title: "memory", Metric: "peak RSS", Unit: "MiB", Better: Lower,
				Samples: map[string][]float64{Hubproxy: {10}, Nginx: {20}}},
		},
	}
}

func TestMarkdown(t *testing.T) {
	md := testReport().Markdown()
	for _, want := range []string{
		"# hubproxy benchmark: 2026-03-04 on box/1",
		"| 1 | cold | time (s) | lower | 0.500 (hubproxy) | 0.250 (hubproxy) |",
		"| 7 | memory | peak RSS (MiB) | lower | 0.500 (hubproxy) | — |",
		"| 1 | cold | time | s | 2.000 (1.000–3.000) | 4.000 | 8.000 |",
		"| 1. cold | time | 2.000 s | 0.500 (hubproxy) | 0.250 (hubproxy) |",
		"`make bench-quick`, quick sizes",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md[strings.Index(md, "## Headline"):], "| 7.") {
		t.Error("a measure not marked Headline is in the headline")
	}
}

func TestWrite(t *testing.T) {
	r := testReport()
	dir := filepath.Join(t.TempDir(), "results")
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "2026-03-04-box_1.md"); r.Path != want {
		t.Errorf("Path = %q, want %q", r.Path, want)
	}
	b, err := os.ReadFile(r.Path)
	if err != nil || string(b) != r.Markdown() {
		t.Errorf("file does not hold the Markdown (err %v)", err)
	}
}
