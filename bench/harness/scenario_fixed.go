package harness

import (
	"context"
	"fmt"
	"runtime"
	"strings"
)

// warmSmallRanges is scenario 8: FixedRangeConns keep-alive connections
// read SmallRange bytes (4 KiB) at random offsets of the large file, which
// each proxy holds whole in its cache, for RangeDuration. It measures
// requests/s and latency: per-request overhead.
func (b *bench) warmSmallRanges(ctx context.Context) ([]Measure, error) {
	return b.fixedRanges(ctx, 8, b.cfg.SmallRange, false)
}

// warmBigRanges is scenario 9: the same with BigRange bytes (1 MiB), which
// measures throughput.
func (b *bench) warmBigRanges(ctx context.Context) ([]Measure, error) {
	return b.fixedRanges(ctx, 9, b.cfg.BigRange, true)
}

// fixedRanges runs fixedRangeLoad against both proxies, warm from scenario
// 1, and against the net/http floor (floor.go) on hubproxy's blob. Direct is
// left out: it has no cache, and scenario 3 already shows what a resolve
// and a redirect per request cost.
func (b *bench) fixedRanges(ctx context.Context, scenario int, n int64, byThroughput bool) ([]Measure, error) {
	f := b.fx.large
	c := b.cfg
	rps, mbs, p50, p99, ups, srvCPU := samples{}, samples{}, samples{}, samples{}, samples{}, samples{}
	cliCores, busyCores := samples{}, samples{}
	seed := uint64(1000 * scenario)
	fl, err := b.startFloor(ctx, n)
	if err != nil {
		return nil, err
	}
	defer fl.stop()
	err = b.each(ctx, fmt.Sprint(scenario), []target{b.hp, b.ng, fl}, func(ctx context.Context, t target) error {
		seed++
		cpu0, _, err := t.cpuTime()
		if err != nil {
			return err
		}
		var res loadResult
		up, _, err := b.upstream(func() error {
			var err error
			res, err = fixedRangeLoad(ctx, fileURL(t.baseURL(), f.repo, f.path), f.size, n, c.FixedRangeConns, c.RangeDuration, seed)
			return err
		})
		if err != nil {
			return err
		}
		cpu1, _, err := t.cpuTime()
		if err != nil {
			return err
		}
		ms := func(q float64) float64 { return percentile(res.latencies, q) * 1000 }
		rate := float64(res.bytes) / float64(MiB) / res.elapsed.Seconds()
		perReq := (cpu1 - cpu0).Seconds() / float64(res.requests) * 1e6
		client := res.clientCPU.Seconds() / res.elapsed.Seconds()
		busy := res.machineCPU.Seconds() / res.elapsed.Seconds()
		rps.add(t.name(), res.reqPerSec())
		mbs.add(t.name(), rate)
		p50.add(t.name(), ms(50))
		p99.add(t.name(), ms(99))
		ups.add(t.name(), float64(up)/float64(MiB))
		srvCPU.add(t.name(), perReq)
		cliCores.add(t.name(), client)
		busyCores.add(t.name(), busy)
		b.logf("%d warm %-8s   %-12s %7.0f req/s  %6.0f MiB/s  p50 %6.3f ms  p99 %7.3f ms  server %5.1f µs CPU/req  client %.2f cores  machine busy %.2f cores  %d dials",
			scenario, sizeName(n), t.name(), res.reqPerSec(), rate, ms(50), ms(99), perReq, client, busy, res.dials)
		return nil
	})
	if err != nil {
		return nil, err
	}
	title := fmt.Sprintf("warm random %s ranges, %d conns", sizeName(n), c.FixedRangeConns)
	var cli []string
	for _, t := range []string{Hubproxy, Nginx, Floor} {
		cli = append(cli, fmt.Sprintf("%s: load generator %s, whole machine %s", t,
			sig(summarize(cliCores[t]).median), sig(summarize(busyCores[t]).median)))
	}
	loadNote := fmt.Sprintf("CPU in use, cores of %d (medians): %s", runtime.NumCPU(), strings.Join(cli, "; "))
	top := Measure{Scenario: scenario, Title: title, Metric: "requests/s", Unit: "req/s", Better: Higher, Samples: rps, Headline: true, Note: loadNote}
	if byThroughput {
		top.Metric, top.Unit, top.Samples = "throughput", "MiB/s", mbs
	}
	return []Measure{
		top,
		{Scenario: scenario, Title: title, Metric: "p50 latency", Unit: "ms", Better: Lower, Samples: p50, Headline: true},
		{Scenario: scenario, Title: title, Metric: "p99 latency", Unit: "ms", Better: Lower, Samples: p99, Headline: true},
		{Scenario: scenario, Title: title, Metric: "server CPU per request", Unit: "µs", Better: Lower, Samples: srvCPU,
			Note: "the proxy's processes; nginx: master, workers and cache processes"},
		{Scenario: scenario, Title: title, Metric: "upstream bytes", Unit: "MiB", Better: Lower, Samples: ups},
	}, nil
}
