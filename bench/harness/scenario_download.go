package harness

import (
	"context"
	"fmt"
	"time"
)

// samples collects one measure's values by target.
type samples map[string][]float64

func (s samples) add(t string, v float64) { s[t] = append(s[t], v) }

// each runs fn for every repetition and every target in ts, repetition by
// repetition, so that a change of load on the machine touches all targets
// alike. It stops at the first error, naming the scenario and target.
func (b *bench) each(ctx context.Context, scenario string, ts []target, fn func(context.Context, target) error) error {
	for rep := 1; rep <= b.cfg.Reps; rep++ {
		for _, t := range ts {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(ctx, t); err != nil {
				return fmt.Errorf("scenario %s, %s, repetition %d: %w", scenario, t.name(), rep, err)
			}
		}
	}
	return nil
}

// upstream resets the hub's counters, runs fn and returns the file bytes
// the hub and its CDN served meanwhile, and fn's wall time.
func (b *bench) upstream(fn func() error) (bytes int64, elapsed time.Duration, err error) {
	b.hub.ResetCounters()
	t0 := time.Now()
	err = fn()
	elapsed = time.Since(t0)
	return b.hub.Counters().BodyBytes, elapsed, err
}

// rss appends t's peak RSS in MiB to s, if t has a process.
func rss(s samples, t target) error {
	n, ok, err := t.peakRSS()
	if err != nil || !ok {
		return err
	}
	s.add(t.name(), float64(n)/float64(MiB))
	return nil
}

// coldDownload is scenario 1: one client downloads the large file through
// a proxy with an empty cache. It also records each proxy's peak RSS for
// scenario 7 and keeps the last instance of each proxy warm for 2 and 3.
func (b *bench) coldDownload(ctx context.Context) ([]Measure, error) {
	f := b.fx.large
	times, ratios, mem := samples{}, samples{}, samples{}
	err := b.each(ctx, "1", b.targets, func(ctx context.Context, t target) error {
		if err := t.restart(ctx); err != nil {
			return err
		}
		c := newClient(1)
		defer c.CloseIdleConnections()
		up, d, err := b.upstream(func() error {
			return download(ctx, c, fileURL(t.baseURL(), f.repo, f.path), f.size, f.sha256)
		})
		if err != nil {
			return err
		}
		times.add(t.name(), d.Seconds())
		ratios.add(t.name(), float64(up)/float64(f.size))
		b.logf("1 cold download  %-12s %7.2f s  %6.0f MiB/s  upstream %.2fx", t.name(), d.Seconds(), mibps(f.size, d), float64(up)/float64(f.size))
		return rss(mem, t)
	})
	if err != nil {
		return nil, err
	}
	b.cold, b.coldUp, b.coldRSS = times, ratios, mem
	title := "cold full download, " + sizeName(f.size)
	return []Measure{
		{Scenario: 1, Title: title, Metric: "time", Unit: "s", Better: Lower, Samples: times, Headline: true},
		{Scenario: 1, Title: title, Metric: "throughput", Unit: "MiB/s", Better: Higher, Samples: rates(times, f.size)},
		{Scenario: 1, Title: title, Metric: "upstream bytes / file size", Unit: "x", Better: Lower, Samples: ratios},
	}, nil
}

// warmDownload is scenario 2: the same download again, from the cache the
// last cold run filled. Direct has no cache, so its figures are scenario
// 1's rather than another few minutes of the same download.
func (b *bench) warmDownload(ctx context.Context) ([]Measure, error) {
	f := b.fx.large
	times, ups := samples{}, samples{}
	err := b.each(ctx, "2", []target{b.hp, b.ng}, func(ctx context.Context, t target) error {
		c := newClient(1)
		defer c.CloseIdleConnections()
		up, d, err := b.upstream(func() error {
			return download(ctx, c, fileURL(t.baseURL(), f.repo, f.path), f.size, f.sha256)
		})
		if err != nil {
			return err
		}
		times.add(t.name(), d.Seconds())
		ups.add(t.name(), float64(up)/float64(MiB))
		b.logf("2 warm download  %-12s %7.2f s  %6.0f MiB/s  upstream %.1f MiB", t.name(), d.Seconds(), mibps(f.size, d), float64(up)/float64(MiB))
		return nil
	})
	if err != nil {
		return nil, err
	}
	times[Direct] = b.cold[Direct]
	for _, r := range b.coldUp[Direct] {
		ups.add(Direct, r*float64(f.size)/float64(MiB))
	}
	title := "warm full download, " + sizeName(f.size)
	note := "direct has no cache: its figure is scenario 1's"
	return []Measure{
		{Scenario: 2, Title: title, Metric: "time", Unit: "s", Better: Lower, Samples: times, Note: note, Headline: true},
		{Scenario: 2, Title: title, Metric: "throughput", Unit: "MiB/s", Better: Higher, Samples: rates(times, f.size), Note: note},
		{Scenario: 2, Title: title, Metric: "upstream bytes", Unit: "MiB", Better: Lower, Samples: ups},
	}, nil
}

// memory is scenario 7, from the peaks scenarios 1 and 5 recorded.
func (b *bench) memory() []Measure {
	note := "VmHWM; nginx: sum over master, workers and cache processes"
	return []Measure{
		{Scenario: 7, Title: "peak RSS during scenario 1", Metric: "peak RSS", Unit: "MiB", Better: Lower, Samples: b.coldRSS, Note: note, Headline: true},
		{Scenario: 7, Title: "peak RSS during scenario 5", Metric: "peak RSS", Unit: "MiB", Better: Lower, Samples: b.herdRSS, Note: note, Headline: true},
	}
}

// rates turns download times into MiB/s.
func rates(times samples, size int64) samples {
	out := samples{}
	for t, vs := range times {
		for _, v := range vs {
			out.add(t, float64(size)/float64(MiB)/v)
		}
	}
	return out
}

func mibps(n int64, d time.Duration) float64 { return float64(n) / float64(MiB) / d.Seconds() }

// sizeName is a size as the report names it ("2 GiB", "24 MiB", "4 KiB").
func sizeName(n int64) string {
	switch {
	case n >= GiB:
		return fmt.Sprintf("%.3g GiB", float64(n)/float64(GiB))
	case n >= MiB:
		return fmt.Sprintf("%.3g MiB", float64(n)/float64(MiB))
	}
	return fmt.Sprintf("%.3g KiB", float64(n)/float64(KiB))
}
