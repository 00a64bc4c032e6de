package harness

import (
	"math"
	"slices"
)

// summary is a sample's median and spread.
type summary struct {
	median, min, max float64
	n                int
}

// summarize returns the median (the mean of the middle two for an even
// count), minimum and maximum of xs; n = 0 for an empty sample.
func summarize(xs []float64) summary {
	if len(xs) == 0 {
		return summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return summary{median: m, min: s[0], max: s[len(s)-1], n: len(s)}
}

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted
// values, and NaN for none.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// ratio is a / b, and NaN when either is missing or b is zero.
func ratio(a, b summary) float64 {
	if a.n == 0 || b.n == 0 || b.median == 0 {
		return math.NaN()
	}
	return a.median / b.median
}
