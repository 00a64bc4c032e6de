package harness

import (
	"context"
	"fmt"
)

// warmRanges is scenario 3: many connections read random small ranges of
// the large file, which scenario 1 left in each proxy's cache. Direct
// clients resolve every request at the hub and follow its redirect to the
// CDN, as hub clients do.
func (b *bench) warmRanges(ctx context.Context) ([]Measure, error) {
	f := b.fx.large
	c := b.cfg
	rps, p50, p99, ups := samples{}, samples{}, samples{}, samples{}
	seed := uint64(0)
	err := b.each(ctx, "3", b.targets, func(ctx context.Context, t target) error {
		seed++
		var res loadResult
		up, _, err := b.upstream(func() error {
			var err error
			res, err = rangeLoad(ctx, fileURL(t.baseURL(), f.repo, f.path), f.size, c.RangeMin, c.RangeMax, c.RangeConns, c.RangeDuration, seed)
			return err
		})
		if err != nil {
			return err
		}
		ms := func(q float64) float64 { return percentile(res.latencies, q) * 1000 }
		rps.add(t.name(), res.reqPerSec())
		p50.add(t.name(), ms(50))
		p99.add(t.name(), ms(99))
		ups.add(t.name(), float64(up)/float64(MiB))
		b.logf("3 warm ranges    %-12s %7.0f req/s  p50 %6.2f ms  p99 %7.2f ms  %6.0f MiB/s", t.name(), res.reqPerSec(), ms(50), ms(99),
			float64(res.bytes)/float64(MiB)/res.elapsed.Seconds())
		return nil
	})
	if err != nil {
		return nil, err
	}
	title := "warm random ranges, " + rangeName(c.RangeMin, c.RangeMax, c.RangeConns)
	return []Measure{
		{Scenario: 3, Title: title, Metric: "requests/s", Unit: "req/s", Better: Higher, Samples: rps, Headline: true},
		{Scenario: 3, Title: title, Metric: "p50 latency", Unit: "ms", Better: Lower, Samples: p50},
		{Scenario: 3, Title: title, Metric: "p99 latency", Unit: "ms", Better: Lower, Samples: p99},
		{Scenario: 3, Title: title, Metric: "upstream bytes", Unit: "MiB", Better: Lower, Samples: ups},
	}, nil
}

// rangeName describes the range mix ("4 KiB–1 MiB, 64 conns").
func rangeName(lo, hi int64, conns int) string {
	return fmt.Sprintf("%s–%s, %d conns", sizeName(lo), sizeName(hi), conns)
}
