package harness

import (
	"context"
	"fmt"
	"sync"
)

// herd is scenario 5: many clients ask a cold proxy for the same file at
// the same moment. A proxy that coalesces fetches upstream about one copy;
// direct clients fetch one copy each.
func (b *bench) herd(ctx context.Context) ([]Measure, error) {
	f := b.fx.herd
	n := b.cfg.HerdClients
	times, ratios, mem := samples{}, samples{}, samples{}
	err := b.each(ctx, "5", b.targets, func(ctx context.Context, t target) error {
		if err := t.restart(ctx); err != nil {
			return err
		}
		c := newClient(n)
		defer c.CloseIdleConnections()
		u := fileURL(t.baseURL(), f.repo, f.path)
		up, d, err := b.upstream(func() error {
			return together(ctx, n, func(ctx context.Context) error { return download(ctx, c, u, f.size, f.sha256) })
		})
		if err != nil {
			return err
		}
		times.add(t.name(), d.Seconds())
		ratios.add(t.name(), float64(up)/float64(f.size))
		b.logf("5 herd           %-12s %7.2f s  upstream %.2fx file", t.name(), d.Seconds(), float64(up)/float64(f.size))
		return rss(mem, t)
	})
	if err != nil {
		return nil, err
	}
	b.herdRSS = mem
	title := fmt.Sprintf("thundering herd, %d cold clients of %s", n, sizeName(f.size))
	return []Measure{
		{Scenario: 5, Title: title, Metric: "wall time", Unit: "s", Better: Lower, Samples: times, Headline: true},
		{Scenario: 5, Title: title, Metric: "upstream bytes / file size", Unit: "x", Better: Lower, Samples: ratios, Headline: true},
	}, nil
}

// together runs fn n times concurrently, released at once by a shared gate
// once every goroutine is ready, and returns the first error. A failure
// cancels the others.
func together(ctx context.Context, n int, fn func(context.Context) error) error {
	return togetherEach(ctx, n, func(ctx context.Context, _ int) error { return fn(ctx) })
}

// togetherEach is together with each call's index (0 to n-1), for callers
// that spread the calls over several servers.
func togetherEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		ready, done sync.WaitGroup
		once        sync.Once
		first       error
	)
	gate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
	return first
}
