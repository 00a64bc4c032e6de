package harness

import (
	"context"
	"math"
	"testing"
)

func TestCeilingParts(t *testing.T) {
	c := &Ceiling{
		Disk: []float64{900, 1000, 1100}, DiskCPU: []float64{0.25},
		SHA: []float64{1024},
		TCP: []float64{4000}, TCPCPU: []float64{0.375},
		Cores: 2, Line: 800, LineConns: 16,
	}
	p := c.parts()
	// 2 cores / (2×0.375 + 1024/1024 + 0.25) core-s per GiB = 1 GiB/s.
	if math.Abs(p.cpu-1024) > 1e-9 {
		t.Errorf("CPU budget %v MiB/s, want 1024", p.cpu)
	}
	if p.ceiling != 800 || p.limit != "upstream line rate" {
		t.Errorf("ceiling %v (%s), want 800 (upstream line rate)", p.ceiling, p.limit)
	}
	c.Line = 0 // uncapped upstream: the next smallest stage
	if p := c.parts(); p.ceiling != 1000 || p.limit != "disk write" {
		t.Errorf("uncapped: ceiling %v (%s), want 1000 (disk write)", p.ceiling, p.limit)
	}
	c.SHA = []float64{300}
	if p := c.parts(); p.ceiling != 300 || p.limit != "sha256" {
		t.Errorf("slow hash: ceiling %v (%s), want 300 (sha256)", p.ceiling, p.limit)
	}
}

func TestMeasureCeiling(t *testing.T) {
	c, err := measureCeiling(context.Background(), t.TempDir(), 3*MiB+5, 2, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	for name, xs := range map[string][]float64{"disk": c.Disk, "disk CPU": c.DiskCPU, "sha": c.SHA, "tcp": c.TCP, "tcp CPU": c.TCPCPU} {
		if len(xs) != 2 {
			t.Errorf("%s: %d samples, want 2", name, len(xs))
		}
		for _, x := range xs {
			if !(x >= 0) || math.IsInf(x, 0) {
				t.Errorf("%s: sample %v", name, x)
			}
		}
	}
	if p := c.parts(); !(p.ceiling > 0) {
		t.Errorf("ceiling %v", p.ceiling)
	}
}
