package harness

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want summary
	}{
		{nil, summary{}},
		{[]float64{3}, summary{median: 3, min: 3, max: 3, n: 1}},
		{[]float64{5, 1, 3}, summary{median: 3, min: 1, max: 5, n: 3}},
		{[]float64{4, 1, 2, 3}, summary{median: 2.5, min: 1, max: 4, n: 4}},
	} {
		if got := summarize(tc.in); got != tc.want {
			t.Errorf("summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	in := []float64{2, 1}
	summarize(in)
	if in[0] != 2 {
		t.Error("summarize sorted its argument in place")
	}
}

func TestPercentile(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	for _, tc := range []struct{ p, want float64 }{{50, 50}, {99, 99}, {100, 100}, {0.1, 1}} {
		if got := percentile(xs, tc.p); got != tc.want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile([]float64{7}, 99); got != 7 {
		t.Errorf("percentile of one value = %v", got)
	}
	if !math.IsNaN(percentile(nil, 50)) {
		t.Error("percentile of nothing is not NaN")
	}
}

func TestRatio(t *testing.T) {
	a, b := summarize([]float64{1}), summarize([]float64{4})
	if got := ratio(a, b); got != 0.25 {
		t.Errorf("ratio = %v, want 0.25", got)
	}
	for _, tc := range [][2]summary{{a, {}}, {{}, b}, {a, summarize([]float64{0})}} {
		if got := ratio(tc[0], tc[1]); !math.IsNaN(got) {
			t.Errorf("ratio(%+v, %+v) = %v, want NaN", tc[0], tc[1], got)
		}
	}
}
