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
				Samples: map[string][]float64{Hubproxy: {1, 2, 3}, Nginx: {4}, Direct: {8}, Aria2c: {1}}},
			{Scenario: 1, Title: "cold", Metric: "throughput", Unit: "MiB/s", Better: Higher,
				Samples: map[string][]float64{Hubproxy: {300}, Nginx: {100}, Direct: {50}, Aria2c: {600}}},
			{Scenario: 7, Title: "memory", Metric: "peak RSS", Unit: "MiB", Better: Lower,
				Samples: map[string][]float64{Hubproxy: {10}, Nginx: {20}}},
		},
	}
}

func TestMarkdown(t *testing.T) {
	md := testReport().Markdown()
	for _, want := range []string{
		"# hubproxy benchmark: 2026-03-04 on box/1",
		"| # | Scenario | Metric | Better | hubproxy / nginx-slice | hubproxy / direct | hubproxy / aria2c | hubproxy / net-http-floor |",
		"| 1 | cold | time (s) | lower | 0.500 (hubproxy) | 0.250 (hubproxy) | 2.000 (peer) |",
		"| 1 | cold | throughput (MiB/s) | higher | 3.000 (hubproxy) | 6.000 (hubproxy) | 0.500 (peer) |",
		"| 7 | memory | peak RSS (MiB) | lower | 0.500 (hubproxy) | — | — |",
		"| # | Scenario | Metric | Unit | hubproxy | nginx-slice | direct | aria2c | net-http-floor | Note |",
		"| 1 | cold | time | s | 2.000 (1.000–3.000) | 4.000 | 8.000 | 1.000 |",
		"| 1. cold | time | 2.000 s | 0.500 (hubproxy) | 0.250 (hubproxy) | 2.000 (peer) |",
		"`make bench-quick`, quick sizes",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md[strings.Index(md, "## Headline"):], "| 7.") {
		t.Error("a measure not marked Headline is in the headline")
	}
	if strings.Contains(md, "ceiling") {
		t.Error("a report without a ceiling has a ceiling section")
	}
}

func TestMarkdownCeiling(t *testing.T) {
	r := testReport()
	r.Ceiling = &Ceiling{
		Bytes: GiB, Disk: []float64{1000}, DiskCPU: []float64{0.25}, SHA: []float64{1024},
		TCP: []float64{4000}, TCPCPU: []float64{0.375}, Cores: 2, Line: 800, LineConns: 16,
	}
	md := r.Markdown()
	for _, want := range []string{
		"## The machine's ceiling for a cold download",
		"| disk write | 1 GiB sequential 1 MiB writes into the caches' filesystem, one fsync at the end | 1000 | 0.250 |",
		"| sha256 | 1 GiB on one core (Go's crypto/sha256, as hubproxy's verification) | 1024 | 1.000 |",
		"| CPU budget | 2 cores ÷ (2 × loopback CPU + sha256 CPU + disk-write CPU) per byte | 1024 | — |",
		"| **ceiling** | **the smallest of the above: upstream line rate** | **800.0** | |",
		"| hubproxy | 300.0 | 38% |",
		"| aria2c | 600.0 | 75% |",
		"Ceiling for a cold verified-and-cached download on this machine: 800.0 MiB/s",
		"hubproxy's cold download reached 38% of it, aria2c's 75%.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
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
