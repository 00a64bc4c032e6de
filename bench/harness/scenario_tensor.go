package harness

import (
	"context"
	"fmt"
)

// firstTensor is scenario 4: the time until a client holds one tensor of a
// large model that no cache has seen. hubproxy answers from its tensor API;
// the peers are read the way a client without one does (the header's
// length, the header, then the tensor's range); and for scale, scenario 1's
// whole-file downloads, which is what loaders that need a local file do.
func (b *bench) firstTensor(ctx context.Context) ([]Measure, error) {
	f := b.fx.large
	name := f.pick()
	api, apiUp := samples{}, samples{}
	byHeader, headerUp := samples{}, samples{}
	measure := func(ctx context.Context, t target, useAPI bool) error {
		if err := t.restart(ctx); err != nil {
			return err
		}
		c := newClient(4)
		defer c.CloseIdleConnections()
		up, d, err := b.upstream(func() error {
			if useAPI {
				return tensorByAPI(ctx, c, t.baseURL(), f.repo, name, f.tensorLen)
			}
			return tensorByHeader(ctx, c, fileURL(t.baseURL(), f.repo, f.path), name)
		})
		if err != nil {
			return err
		}
		how, times, ups := "header+range", byHeader, headerUp
		if useAPI {
			how, times, ups = "tensor API", api, apiUp
		}
		times.add(t.name(), d.Seconds())
		ups.add(t.name(), float64(up)/float64(f.tensorLen))
		b.logf("4 first tensor   %-12s %7.3f s  upstream %.2fx tensor  (%s)", t.name(), d.Seconds(), float64(up)/float64(f.tensorLen), how)
		return nil
	}
	err := b.each(ctx, "4", b.targets, func(ctx context.Context, t target) error {
		if t == b.hp {
			if err := measure(ctx, t, true); err != nil {
				return err
			}
		}
		return measure(ctx, t, false)
	})
	if err != nil {
		return nil, err
	}
	// The headline compares hubproxy's API with each peer's best client.
	best := samples{Hubproxy: api[Hubproxy], Nginx: byHeader[Nginx], Direct: byHeader[Direct]}
	bestUp := samples{Hubproxy: apiUp[Hubproxy], Nginx: headerUp[Nginx], Direct: headerUp[Direct]}
	whole := samples{Hubproxy: api[Hubproxy], Nginx: b.cold[Nginx], Direct: b.cold[Direct]}
	title := fmt.Sprintf("first tensor (%s) of a cold %s model", sizeName(f.tensorLen), sizeName(f.size))
	return []Measure{
		{Scenario: 4, Title: title, Metric: "time", Unit: "s", Better: Lower, Samples: best, Headline: true,
			Note: "hubproxy: tensor API; peers: client reads header, then the tensor's range"},
		{Scenario: 4, Title: title, Metric: "upstream bytes / tensor size", Unit: "x", Better: Lower, Samples: bestUp,
			Note: "as above"},
		{Scenario: 4, Title: title, Metric: "time, all clients parse the header", Unit: "s", Better: Lower, Samples: byHeader,
			Note: "hubproxy through /resolve/ ranges, like the peers"},
		{Scenario: 4, Title: title, Metric: "time vs downloading the file", Unit: "s", Better: Lower, Samples: whole,
			Note: "hubproxy: tensor API; peers: whole-file download (scenario 1 times)"},
	}, nil
}

// listing is scenario 6: every tensor's name, dtype, shape and offsets of a
// cold sharded model. hubproxy answers GET /models/{repo}/tensors; the
// peers are read as a client would: the index, then each shard's header.
func (b *bench) listing(ctx context.Context) ([]Measure, error) {
	want := b.cfg.Shards * b.cfg.ShardTensors
	times, ups := samples{}, samples{}
	err := b.each(ctx, "6", b.targets, func(ctx context.Context, t target) error {
		if err := t.restart(ctx); err != nil {
			return err
		}
		c := newClient(8)
		defer c.CloseIdleConnections()
		var n int
		up, d, err := b.upstream(func() error {
			var err error
			if t == b.hp {
				n, err = listingByAPI(ctx, c, t.baseURL(), shardedRepo)
			} else {
				n, err = listingByHeaders(ctx, c, t.baseURL(), shardedRepo)
			}
			return err
		})
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("%w: listed %d tensors, want %d", ErrShort, n, want)
		}
		times.add(t.name(), d.Seconds())
		ups.add(t.name(), float64(up)/float64(KiB))
		b.logf("6 listing        %-12s %7.3f s  upstream %.0f KiB", t.name(), d.Seconds(), float64(up)/float64(KiB))
		return nil
	})
	if err != nil {
		return nil, err
	}
	title := fmt.Sprintf("header-only listing, %d shards, %s", b.cfg.Shards, sizeName(b.fx.shardBytes))
	note := fmt.Sprintf("headers are %s in all; hubproxy: tensor listing API; peers: index + each shard's header", sizeName(b.fx.shardHeader))
	return []Measure{
		{Scenario: 6, Title: title, Metric: "time", Unit: "s", Better: Lower, Samples: times, Headline: true},
		{Scenario: 6, Title: title, Metric: "upstream bytes", Unit: "KiB", Better: Lower, Samples: ups, Note: note, Headline: true},
	}, nil
}
