package harness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// loadResult is one run of the range load generator.
type loadResult struct {
	requests int
	bytes    int64
	elapsed  time.Duration
	// latencies of every completed request, in seconds, sorted.
	latencies []float64
	// clientCPU is the CPU time the harness process used during the run
	// (fixedRangeLoad only): the load generator's cost, as nothing else in
	// the harness is busy while the proxies serve from their caches.
	clientCPU time.Duration
	// machineCPU is the CPU time the whole machine spent busy during the run
	// (fixedRangeLoad only).
	machineCPU time.Duration
	// dials counts connections opened (fixedRangeLoad only): conns when
	// every connection was kept alive throughout.
	dials int
}

func (r loadResult) reqPerSec() float64 { return float64(r.requests) / r.elapsed.Seconds() }

// rangeLoad runs conns workers, each issuing ranged GETs of u back to back
// on its own connection for d: random offsets in [0, size), lengths
// log-uniform in [lo, hi] so small and large reads are equally likely per
// octave. Every response must be a 206 of exactly the asked length; the
// first failure ends the run with an error.
func rangeLoad(ctx context.Context, u string, size, lo, hi int64, conns int, d time.Duration, seed uint64) (loadResult, error) {
	c := newClient(conns)
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu    sync.Mutex
		res   loadResult
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat, n, b, err := rangeWorker(ctx, c, u, size, lo, hi, deadline, rand.New(rand.NewPCG(seed, uint64(w))))
			mu.Lock()
			defer mu.Unlock()
			res.latencies = append(res.latencies, lat...)
			res.requests += n
			res.bytes += b
			if err != nil && first == nil {
				first = err
				cancel()
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res, res.finish(ctx, first, d)
}

// finish ends a run of d: the first worker's error, else ctx's, else an
// error when no request completed; it sorts the latencies.
func (res *loadResult) finish(ctx context.Context, first error, d time.Duration) error {
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if res.requests == 0 {
		return fmt.Errorf("harness: no range request completed in %v", d)
	}
	slices.Sort(res.latencies)
	return nil
}

// rangeWorker is one connection's loop until deadline.
func rangeWorker(ctx context.Context, c *http.Client, u string, size, lo, hi int64, deadline time.Time, rng *rand.Rand) (lat []float64, n int, b int64, err error) {
	buf := make([]byte, 256<<10)
	logLo, logHi := math.Log(float64(lo)), math.Log(float64(hi))
	for time.Now().Before(deadline) {
		length := int64(math.Round(math.Exp(logLo + rng.Float64()*(logHi-logLo))))
		length = min(max(length, lo), hi)
		off := rng.Int64N(size - length + 1)
		t0 := time.Now()
		if err := discardRange(ctx, c, u, off, length, buf); err != nil {
			if errors.Is(err, context.Canceled) {
				return lat, n, b, nil // another worker failed; it reports why
			}
			return lat, n, b, err
		}
		lat = append(lat, time.Since(t0).Seconds())
		n++
		b += length
	}
	return lat, n, b, nil
}
