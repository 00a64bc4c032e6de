package harness

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
)

// logWriter sends progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestQuickBenchmark is `make bench-quick` end to end: the fake hub,
// hubproxy (built from this module), nginx and aria2c on loopback, the
// ceiling probes, every scenario, the cluster on MinIO and file:// stores,
// the report written. It checks that the run completes, that the table has
// every scenario with figures for every target that takes part in it, that
// the cluster section has every tier's figures and that the stores shared,
// that the ceiling section is there, and that nothing it started is left
// running; never the timings. (Scenarios 1 and 10 themselves fail the run if
// a hubproxy does not end up with the file in its cache.)
//
// It needs nginx. When nginx or aria2c is missing it installs them with
// apt-get if it runs as root; without nginx it otherwise fails with the
// command to run, and without aria2c it runs scenario 1 without that peer.
func TestQuickBenchmark(t *testing.T) {
	if _, err := EnsureNginx(context.Background(), true, logWriter{t}); err != nil {
		t.Fatalf("the benchmark test needs nginx with the slice module: %v", err)
	}
	_, ariaErr := EnsureAria2c(context.Background(), true, logWriter{t})
	if ariaErr != nil {
		t.Logf("scenario 1 runs without aria2c: %v", ariaErr)
	}
	cfg := Quick()
	// The cluster's MinIO, found (or built into .tools/) as every
	// shared-store test finds it; `make test` gives it in $HUBPROXY_MINIO.
	cfg.MinioBin = miniotest.Binary(t)
	cfg.OutDir = t.TempDir()
	cfg.WorkDir = t.TempDir()
	cfg.Log = logWriter{t}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	b, err := os.ReadFile(rep.Path)
	if err != nil {
		t.Fatalf("the report was not written: %v", err)
	}
	md := string(b)
	ratios, raw, ok := strings.Cut(md, "## Raw figures")
	if !ok || !strings.Contains(ratios, "| # | Scenario | Metric | Better | hubproxy / nginx-slice | hubproxy / direct | hubproxy / aria2c | hubproxy / net-http-floor |") ||
		!strings.Contains(raw, "| # | Scenario | Metric | Unit | hubproxy | nginx-slice | direct | aria2c | net-http-floor | Note |") {
		t.Fatalf("the report lacks its tables:\n%s", md)
	}
	// Scenarios 8 and 9 divide hubproxy by the net/http floor too.
	for _, line := range strings.Split(ratios, "\n") {
		if (strings.HasPrefix(line, "| 8 | ") || strings.HasPrefix(line, "| 9 | ")) && strings.Contains(line, "| higher |") &&
			strings.HasSuffix(line, "| — |") {
			t.Errorf("no net/http floor figure in %q", line)
		}
	}
	for s := 1; s <= 9; s++ {
		row := fmt.Sprintf("\n| %d | ", s)
		if !strings.Contains(ratios, row) || !strings.Contains(raw, row) {
			t.Errorf("scenario %d has no row in both tables", s)
		}
	}
	if !strings.Contains(raw, "## The machine's ceiling for a cold download") || !strings.Contains(md, "Ceiling for a cold verified-and-cached download") {
		t.Errorf("the report has no ceiling section or line:\n%s", md)
	}
	if c := rep.Ceiling; c == nil || len(c.Disk) != cfg.Reps || len(c.SHA) != cfg.Reps || len(c.TCP) != cfg.Reps || math.IsNaN(c.parts().ceiling) {
		t.Errorf("ceiling %+v, want %d samples of each probe", rep.Ceiling, cfg.Reps)
	}
	for _, m := range rep.Measures {
		for _, name := range targetNames {
			want := cfg.Reps
			switch {
			case name == Direct && (m.Scenario == 7 || m.Scenario >= 8):
				want = 0 // no process of its own; no cache to be warm
			case name == Direct && m.Metric == "CPU time of the target's processes":
				want = 0
			case (name == Direct || name == Aria2c) && m.Metric == "time after the last upstream byte":
				want = 0 // proxies only
			case name == Aria2c && (m.Scenario != 1 || ariaErr != nil):
				want = 0
			case name == Floor && m.Scenario != 8 && m.Scenario != 9:
				want = 0 // a yardstick for warm ranges only
			}
			if n := len(m.Samples[name]); n != want {
				t.Errorf("scenario %d %q: %d samples for %s, want %d", m.Scenario, m.Metric, n, name, want)
			}
		}
	}

	checkCluster(t, rep, cfg)
	checkS3(t, rep, cfg)

	if len(rep.Groups) == 0 {
		t.Error("the run reports no child processes")
	}
	for _, pgid := range rep.Groups {
		if left := groupMembers(pgid); len(left) != 0 {
			t.Errorf("processes %v of group %d are still running", left, pgid)
		}
	}
}

// TestQuickS3 is `bin/hubbench -quick -only s3`: scenario 11 alone, with
// hubproxy's S3 API, its hub routes and MinIO, and nothing else (no nginx,
// no aria2c, no ceiling, no cluster).
func TestQuickS3(t *testing.T) {
	cfg := Quick()
	cfg.Only = OnlyS3
	cfg.MinioBin = miniotest.Binary(t)
	cfg.OutDir = t.TempDir()
	cfg.WorkDir = t.TempDir()
	cfg.Log = logWriter{t}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rep.Measures) != 0 || rep.Cluster != nil || rep.Ceiling != nil {
		t.Errorf("an s3-only run ran more: %d measures, cluster %v, ceiling %v", len(rep.Measures), rep.Cluster != nil, rep.Ceiling != nil)
	}
	checkS3(t, rep, cfg)
	for _, pgid := range rep.Groups {
		if left := groupMembers(pgid); len(left) != 0 {
			t.Errorf("processes %v of group %d are still running", left, pgid)
		}
	}
}

// checkS3 checks scenario 11's figures: every pattern has a figure for the
// S3 API and its peer in every repetition; warm reads through the S3 API
// cost no upstream bytes; a cold read through it costs the whole file
// upstream, as much as through the hub routes and no more. Never times.
func checkS3(t *testing.T, rep *Report, cfg Config) {
	t.Helper()
	s := rep.S3
	// Three rows per warm pattern (S3Conns ranged, one whole), two cold.
	if s == nil || len(s.Measures) != 3*(len(cfg.S3Conns)+1)+2 {
		t.Fatalf("S3 result %+v, want %d measures", s, 3*(len(cfg.S3Conns)+1)+2)
	}
	md := rep.Markdown()
	if !strings.Contains(md, "## S3 API: hubproxy against MinIO warm") || !strings.Contains(md, "S3 API on a ") {
		t.Errorf("the report lacks the S3 section or its headline:\n%s", md)
	}
	for _, m := range s.Measures {
		peer := s3Peer(m)
		want := map[string]int{ColS3: cfg.Reps}
		switch {
		case m.Metric == "upstream bytes":
			peer = "" // hubproxy only
		case strings.HasPrefix(m.Title, "warm"):
			want[ColMinio] = cfg.Reps
		default:
			want[ColHub] = cfg.Reps
		}
		if peer != "" && want[peer] == 0 {
			t.Errorf("%s %q: divided by %s", m.Title, m.Metric, peer)
		}
		for _, col := range s3Columns() {
			if n := len(m.Samples[col]); n != want[col] {
				t.Errorf("%s %q: %d samples for %s, want %d", m.Title, m.Metric, n, col, want[col])
			}
		}
		switch m.Metric {
		case "upstream bytes":
			if v := summarize(m.Samples[ColS3]); v.max != 0 {
				t.Errorf("%s: %v MiB upstream on a warm cache", m.Title, m.Samples[ColS3])
			}
		case "upstream bytes / file size":
			s3, hub := summarize(m.Samples[ColS3]), summarize(m.Samples[ColHub])
			if s3.min < 1 || hub.min < 1 || s3.max > hub.max*1.01 {
				t.Errorf("cold upstream / file: S3 API %v, hub routes %v; want at least the file each, the S3 API no more than the hub routes",
					m.Samples[ColS3], m.Samples[ColHub])
			}
		}
	}
}

// checkCluster checks scenario 10's figures: every tier has upstream and
// time figures for every repetition, the store tiers (and only they) store
// traffic, and sharing worked: each store tier fetched less upstream than
// the same nodes without one, and its nodes both wrote and read the store.
// Byte counts only, never times.
func checkCluster(t *testing.T, rep *Report, cfg Config) {
	t.Helper()
	c := rep.Cluster
	if c == nil || c.Nodes != cfg.ClusterNodes || c.Clients != cfg.ClusterClients || len(c.Measures) != 4 {
		t.Fatalf("cluster result %+v, want %d nodes × %d clients and 4 measures", c, cfg.ClusterNodes, cfg.ClusterClients)
	}
	md := rep.Markdown()
	if !strings.Contains(md, fmt.Sprintf("## Cluster: %d nodes × %d clients on one cold file", c.Nodes, c.Clients)) ||
		!strings.Contains(md, "| Metric | Better | MinIO store / no store | file:// store / no store | MinIO store / one shared pod | file:// store / one shared pod |") ||
		!strings.Contains(md[strings.Index(md, "## Headline"):], "Cluster, ") {
		t.Errorf("the report lacks the cluster section, its ratios or its headline:\n%s", md)
	}
	byMetric := map[string]Measure{}
	for _, m := range c.Measures {
		byMetric[m.Metric] = m
		for _, tier := range clusterTiers() {
			want := cfg.Reps
			if m.Unit == "MiB" && tier != TierS3 && tier != TierFile {
				want = 0 // no store, no store traffic
			}
			if n := len(m.Samples[tier]); n != want {
				t.Errorf("cluster %q: %d samples for %s, want %d", m.Metric, n, tier, want)
			}
		}
	}
	up := byMetric["upstream bytes / file size"]
	none := summarize(up.Samples[TierNone]).median
	for _, tier := range []string{TierS3, TierFile} {
		if s := summarize(up.Samples[tier]); s.max >= none {
			t.Errorf("%s: upstream %v× the file, not below the %v× of the nodes without a store", tier, up.Samples[tier], none)
		}
		for _, metric := range []string{"store bytes written", "store bytes read"} {
			if s := summarize(byMetric[metric].Samples[tier]); s.n == 0 || s.min <= 0 {
				t.Errorf("%s: %s %v, want some in every repetition", tier, metric, byMetric[metric].Samples[tier])
			}
		}
	}
}
