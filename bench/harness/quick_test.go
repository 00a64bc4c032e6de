package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// logWriter sends progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestQuickBenchmark is `make bench-quick` end to end: the fake hub,
// hubproxy (built from this module) and nginx on loopback, every scenario,
// the report written. It checks that the run completes, that the table has
// every scenario with figures for every target, and that nothing it started
// is left running; never the timings.
//
// It needs nginx. When nginx is missing it installs nginx-light with
// apt-get if it runs as root, and otherwise fails with the command to run.
func TestQuickBenchmark(t *testing.T) {
	if _, err := EnsureNginx(context.Background(), true, logWriter{t}); err != nil {
		t.Fatalf("the benchmark test needs nginx with the slice module: %v", err)
	}
	cfg := Quick()
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
	if !ok || !strings.Contains(ratios, "| # | Scenario | Metric | Better | hubproxy / nginx-slice | hubproxy / direct |") ||
		!strings.Contains(raw, "| # | Scenario | Metric | Unit | hubproxy | nginx-slice | direct | Note |") {
		t.Fatalf("the report lacks its tables:\n%s", md)
	}
	for s := 1; s <= 7; s++ {
		row := fmt.Sprintf("\n| %d | ", s)
		if !strings.Contains(ratios, row) || !strings.Contains(raw, row) {
			t.Errorf("scenario %d has no row in both tables", s)
		}
	}
	for _, m := range rep.Measures {
		for _, name := range targetNames {
			if name == Direct && m.Scenario == 7 {
				continue // direct has no process of its own
			}
			if n := len(m.Samples[name]); n != cfg.Reps {
				t.Errorf("scenario %d %q: %d samples for %s, want %d", m.Scenario, m.Metric, n, name, cfg.Reps)
			}
		}
	}

	if len(rep.Groups) == 0 {
		t.Error("the run reports no child processes")
	}
	for _, pgid := range rep.Groups {
		if left := groupMembers(pgid); len(left) != 0 {
			t.Errorf("processes %v of group %d are still running", left, pgid)
		}
	}
}
