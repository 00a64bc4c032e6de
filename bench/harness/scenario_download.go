package harness

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
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

// upstreamTail is upstream, also timing how long fn ran on after the hub
// and its CDN had sent size bytes: for a proxy, the work between the last
// upstream byte and the client's last byte (hubproxy finishes its running
// hash, fsyncs and renames the blob there), in seconds; NaN if the hub never
// sent size bytes.
func (b *bench) upstreamTail(size int64, fn func() error) (bytes int64, elapsed time.Duration, tail float64, err error) {
	b.hub.ResetCounters() // before the watcher starts, which reads them
	done := make(chan struct{})
	reached := make(chan time.Time, 1)
	go func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if b.hub.Counters().BodyBytes >= size {
				reached <- time.Now()
				return
			}
			select {
			case <-done:
				// fn has returned; bytes that arrived since the last look
				// arrived at its end.
				if b.hub.Counters().BodyBytes >= size {
					reached <- time.Now()
				}
				close(reached)
				return
			case <-t.C:
			}
		}
	}()
	t0 := time.Now()
	err = fn()
	end := time.Now()
	close(done)
	elapsed = end.Sub(t0)
	tail = math.NaN()
	if at, ok := <-reached; ok {
		tail = max(end.Sub(at), 0).Seconds()
	}
	return b.hub.Counters().BodyBytes, elapsed, tail, err
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

// cpuSince appends to s the CPU time t's processes used since before (a
// cpuTime reading), if t has processes. (aria2c's reading is its last
// process's whole life, and 0 after restart.)
func cpuSince(s samples, t target, before time.Duration) error {
	now, ok, err := t.cpuTime()
	if err != nil || !ok {
		return err
	}
	s.add(t.name(), (now - before).Seconds())
	return nil
}

// coldDownload is scenario 1: one client downloads the large file through
// a proxy with an empty cache; and aria2c, with its 16 connections, fetches
// it from the CDN into a local file, as the peer that shows what the link
// allows. It also records each proxy's peak RSS for scenario 7 and keeps the
// last instance of each proxy warm for 2, 3, 8 and 9. A hubproxy download
// counts only if hubproxy then holds the file, verified, in its cache.
func (b *bench) coldDownload(ctx context.Context) ([]Measure, error) {
	f := b.fx.large
	times, ratios, mem, cpu, tails := samples{}, samples{}, samples{}, samples{}, samples{}
	ts := b.targets
	if b.aria != nil {
		ts = append(slices.Clone(ts), b.aria)
	}
	err := b.each(ctx, "1", ts, func(ctx context.Context, t target) error {
		if err := t.restart(ctx); err != nil {
			return err
		}
		cpu0, _, err := t.cpuTime()
		if err != nil {
			return err
		}
		c := newClient(1)
		defer c.CloseIdleConnections()
		u := fileURL(t.baseURL(), f.repo, f.path)
		var path string
		up, d, tail, err := b.upstreamTail(f.size, func() error {
			if t, ok := t.(*aria2); ok {
				var err error
				path, err = t.fetch(ctx, u)
				return err
			}
			return download(ctx, c, u, f.size, f.sha256)
		})
		if err == nil && path != "" {
			err = checkFile(path, f.size, f.sha256)
			os.RemoveAll(filepath.Dir(path))
		}
		if err != nil {
			return err
		}
		if err := cpuSince(cpu, t, cpu0); err != nil {
			return err
		}
		cached := ""
		if t == b.hp {
			lag, err := b.cachedBlob(ctx, b.hp, f)
			if err != nil {
				return err
			}
			cached = fmt.Sprintf("  blob cached %v after", lag.Round(time.Millisecond))
		}
		times.add(t.name(), d.Seconds())
		ratios.add(t.name(), float64(up)/float64(f.size))
		if _, ok := t.(*server); ok && !math.IsNaN(tail) {
			tails.add(t.name(), tail)
		}
		b.logf("1 cold download  %-12s %7.2f s  %6.0f MiB/s  upstream %.2fx  last upstream byte %.3f s before the end  CPU %.2f s%s",
			t.name(), d.Seconds(), mibps(f.size, d), float64(up)/float64(f.size), tail, last(cpu[t.name()]), cached)
		return rss(mem, t)
	})
	if err != nil {
		return nil, err
	}
	b.cold, b.coldUp, b.coldRSS = times, ratios, mem
	title := "cold full download, " + sizeName(f.size)
	return []Measure{
		{Scenario: 1, Title: title, Metric: "time", Unit: "s", Better: Lower, Samples: times, Headline: true},
		{Scenario: 1, Title: title, Metric: "throughput", Unit: "MiB/s", Better: Higher, Samples: rates(times, f.size), Headline: true},
		{Scenario: 1, Title: title, Metric: "upstream bytes / file size", Unit: "x", Better: Lower, Samples: ratios},
		{Scenario: 1, Title: title, Metric: "time after the last upstream byte", Unit: "s", Better: Lower, Samples: tails,
			Note: "proxies only; hubproxy finishes its running sha256, fsyncs and renames the blob there before sending its last bytes"},
		{Scenario: 1, Title: title, Metric: "CPU time of the target's processes", Unit: "s", Better: Lower, Samples: cpu,
			Note: "proxies: their processes; aria2c: its process; the harness (fake hub, client) not counted"},
	}, nil
}

// cachedBlob checks that the running hubproxy hp holds f in its cache as a
// complete, verified blob (blobs/<sha256>, the full size), waiting up to
// 10 s for it; it returns how long after the download it appeared.
func (b *bench) cachedBlob(ctx context.Context, hp *server, f modelFile) (time.Duration, error) {
	repo, err := hub.ParseRepo(hub.Model, f.repo)
	if err != nil {
		return 0, err
	}
	info, ok := b.hub.Stat(repo, "main", f.path)
	if !ok {
		return 0, fmt.Errorf("harness: the fake hub has no %s/%s", f.repo, f.path)
	}
	path := filepath.Join(hp.cacheDir(), repo.CacheDir(), "blobs", info.ETag)
	t0 := time.Now()
	for {
		fi, err := os.Stat(path)
		if err == nil && fi.Size() == f.size {
			return time.Since(t0), nil
		}
		if time.Since(t0) > 10*time.Second || ctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("%d bytes, want %d", fi.Size(), f.size)
			}
			return 0, fmt.Errorf("%w: %s served the whole file but did not cache it as %s: %v", ErrShort, hp.name(), path, err)
		}
		time.Sleep(10 * time.Millisecond) // waiting on another process's file
	}
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

// last is the latest value of xs, NaN for none.
func last(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return xs[len(xs)-1]
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
