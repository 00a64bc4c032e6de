package tensor

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/hubproxy/hubproxy/internal/header"
)

// parseBudget bounds the header bytes being parsed at once, across all
// requests. A parse holds its header's length, N, from before it reads the
// header whole until it has parsed it: the text, the decoded entries and the
// name index are all alive then, some five to seven times N at the peak
// (TestListingMemory measures it), so the budget bounds that peak rather
// than the number of parses. Waiters are served first come, first served,
// so a small header queued behind large ones is not starved.
type parseBudget struct {
	sem  *semaphore.Weighted
	size int64

	mu      sync.Mutex
	inUse   int64  // bytes held by parses now
	peak    int64  // the most inUse has been
	waiting int    // parses waiting for bytes
	onWait  func() // tests: called when a parse starts to wait
}

func newParseBudget(size int64) *parseBudget {
	return &parseBudget{sem: semaphore.NewWeighted(size), size: size}
}

// acquire charges n bytes, waiting with ctx while the budget is spent. A
// header larger than the whole budget could never be charged, and is
// refused as HeaderLimitExceeded rather than waited for. release returns
// the bytes; it may be called more than once.
func (b *parseBudget) acquire(ctx context.Context, n int64) (release func(), err error) {
	if n > b.size {
		return nil, &header.FormatError{Kind: header.HeaderLimitExceeded, Reason: fmt.Sprintf(
			"a header of %d bytes exceeds this proxy's budget of %d header bytes parsed at once", n, b.size)}
	}
	if !b.sem.TryAcquire(n) {
		b.mu.Lock()
		b.waiting++
		hook := b.onWait
		b.mu.Unlock()
		if hook != nil {
			hook()
		}
		err := b.sem.Acquire(ctx, n)
		b.mu.Lock()
		b.waiting--
		b.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	b.inUse += n
	b.peak = max(b.peak, b.inUse)
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.inUse -= n
			b.mu.Unlock()
			b.sem.Release(n)
		})
	}, nil
}

// stats reports the bytes held now, the most ever held, and the parses
// waiting.
func (b *parseBudget) stats() (inUse, peak int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse, b.peak, b.waiting
}
