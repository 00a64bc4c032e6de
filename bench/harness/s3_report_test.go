package harness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func testS3() *S3Bench {
	return &S3Bench{Size: 24 * MiB, Range: 8 * MiB, Measures: []Measure{
		{Scenario: 11, Title: "warm ranged GETs of 8 MiB, 8 conns", Metric: "throughput", Unit: "MiB/s", Better: Higher, Headline: true,
			Samples: map[string][]float64{ColS3: {900, 1000, 1100}, ColMinio: {500}}},
		{Scenario: 11, Title: "warm ranged GETs of 8 MiB, 8 conns", Metric: "p99 latency", Unit: "ms", Better: Lower, Headline: true,
			Samples: map[string][]float64{ColS3: {20}, ColMinio: {20.5}}},
		{Scenario: 11, Title: "warm ranged GETs of 8 MiB, 8 conns", Metric: "upstream bytes", Unit: "MiB", Better: Lower, Note: "hubproxy only",
			Samples: map[string][]float64{ColS3: {0}}},
		{Scenario: 11, Title: "cold whole-object GET, 1 conn", Metric: "throughput", Unit: "MiB/s", Better: Higher, Headline: true,
			Samples: map[string][]float64{ColS3: {180}, ColHub: {200}}},
		{Scenario: 11, Title: "cold whole-object GET, 1 conn", Metric: "upstream bytes / file size", Unit: "x", Better: Lower, Headline: true,
			Samples: map[string][]float64{ColS3: {1}, ColHub: {1}}},
	}}
}

// The S3 section's rows: raw figures by column, each divided by its own
// peer (MinIO warm, the hub routes cold), and the headline sentence.
func TestS3Markdown(t *testing.T) {
	r := testReport()
	r.S3 = testS3()
	md := r.Markdown()
	for _, want := range []string{
		"## S3 API: hubproxy against MinIO warm, against its hub routes cold (scenario 11; median (min–max))",
		"| Pattern | Metric | Unit | hubproxy S3 API | MinIO | hubproxy hub routes | S3 API / peer | Better | Note |",
		"| warm ranged GETs of 8 MiB, 8 conns | throughput | MiB/s | 1000 (900.0–1100) | 500.0 | — | 2.000 (hubproxy S3 API) | higher |  |",
		"| warm ranged GETs of 8 MiB, 8 conns | p99 latency | ms | 20.00 | 20.50 | — | 0.976 (tie) | lower |  |",
		"| warm ranged GETs of 8 MiB, 8 conns | upstream bytes | MiB | 0 | — | — | — | lower | hubproxy only |",
		"| cold whole-object GET, 1 conn | throughput | MiB/s | 180.0 | — | 200.0 | 0.900 (hubproxy hub routes) | higher |  |",
		"| cold whole-object GET, 1 conn | upstream bytes / file size | x | 1.000 | — | 1.000 | 1.000 (tie) | lower |  |",
		"S3 API on a 24 MiB file: warm ranged GETs of 8 MiB, 8 conns, throughput 2.000× MinIO; warm ranged GETs of 8 MiB, 8 conns, p99 latency 0.976× MinIO; " +
			"cold whole-object GET, 1 conn, throughput 0.900× hubproxy hub routes; cold whole-object GET, 1 conn, upstream bytes / file size 1.000× hubproxy hub routes.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	// The section comes after the target tables and before the headline.
	if i, j, k := strings.Index(md, "## Raw figures"), strings.Index(md, "## S3 API"), strings.Index(md, "## Headline"); !(i < j && j < k) {
		t.Errorf("sections out of order (raw %d, S3 %d, headline %d)", i, j, k)
	}
}

// A run of the S3 scenario alone has no target tables and no empty
// headline table, and says how it was run.
func TestS3OnlyMarkdown(t *testing.T) {
	r := testReport()
	r.Measures = nil
	r.Settings = []string{"mode: quick", "only: scenario s3"}
	r.S3 = testS3()
	md := r.Markdown()
	for _, unwanted := range []string{"## Ratios", "## Raw figures", "| Scenario | Metric | hubproxy |"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("Markdown of an s3-only run has %q:\n%s", unwanted, md)
		}
	}
	if !strings.Contains(md, "(`bin/hubbench -quick -only s3`, quick sizes):\n\nS3 API on a 24 MiB file: ") || strings.Contains(md, ", nginx ") {
		t.Errorf("headline of an s3-only run:\n%s", md)
	}
}

func TestS3ConfigValidate(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"range above the file": func(c *Config) { c.S3RangeSize = c.LargeSize + 1 },
		"no range":             func(c *Config) { c.S3RangeSize = 0 },
		"no conns":             func(c *Config) { c.S3Conns = nil },
		"zero conns":           func(c *Config) { c.S3Conns = []int{8, 0} },
		"unknown only":         func(c *Config) { c.Only = "cluster" },
	} {
		c := Quick()
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := Quick()
	c.Only = OnlyS3
	if err := c.Validate(); err != nil {
		t.Errorf("-only s3: %v", err)
	}
}

// wholeLoad reads the whole body every time, at least once however short
// the run, and fails on a short body.
func TestWholeLoad(t *testing.T) {
	body := strings.Repeat("x", 1000)
	var short atomic.Bool
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		b := body
		if short.Load() {
			b = body[:999]
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write([]byte(b))
	}))
	defer srv.Close()
	res, err := wholeLoad(context.Background(), srv.URL, 1000, time.Nanosecond)
	if err != nil || res.requests < 1 || res.bytes != int64(res.requests)*1000 || len(res.latencies) != res.requests || n.Load() != int64(res.requests) {
		t.Fatalf("wholeLoad = %+v, %v after %d requests served", res, err, n.Load())
	}
	short.Store(true)
	if _, err := wholeLoad(context.Background(), srv.URL, 1000, time.Nanosecond); err == nil {
		t.Error("a short body was accepted")
	}
}

func TestAndList(t *testing.T) {
	for want, ns := range map[string][]int{"8": {8}, "8 and 16": {8, 16}, "4, 8 and 16": {4, 8, 16}} {
		if got := andList(ns); got != want {
			t.Errorf("andList(%v) = %q, want %q", ns, got, want)
		}
	}
}
