package flight

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/testutil"
)

// Callers of one key at once share one run of fn and its result.
func TestSharesOneRun(t *testing.T) {
	var g Group[int]
	var runs atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	results := make([]int, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := g.Do(context.Background(), "k", time.Minute, func(context.Context) (int, error) {
				if runs.Add(1) == 1 {
					close(started)
				}
				<-release
				return 42, nil
			})
			if err != nil {
				t.Error(err)
			}
			results[i] = v
		}()
	}
	<-started
	// Every caller must be waiting before the run ends, or a late one
	// would start a second run: wait until all have joined.
	testutil.Eventually(t, 10*time.Second, "every caller waiting on the run", func() bool { return g.Waiting("k") == len(results) })
	close(release)
	wg.Wait()
	if runs.Load() != 1 {
		t.Errorf("fn ran %d times, want 1", runs.Load())
	}
	for i, v := range results {
		if v != 42 {
			t.Errorf("caller %d got %d", i, v)
		}
	}
}

// When the only caller leaves, the run's context is cancelled and the next
// caller starts afresh.
func TestLastCallerLeavingCancels(t *testing.T) {
	var g Group[int]
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "k", time.Minute, func(fctx context.Context) (int, error) {
			cancel()
			<-fctx.Done()
			stopped <- fctx.Err()
			return 0, fctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("leaving caller got %v", err)
		}
	}()
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("run's context ended with %v, want cancelled", err)
	}
	v, err := g.Do(context.Background(), "k", time.Minute, func(context.Context) (int, error) { return 7, nil })
	if err != nil || v != 7 {
		t.Errorf("next caller got %d, %v; want a fresh run's 7", v, err)
	}
}
