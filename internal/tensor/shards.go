package tensor

import (
	"context"
	"sync"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// shardReads is how many shard headers one request reads at a time. Every
// read is an upstream request on a cold cache, so this, not the shard count,
// bounds what one listing asks of the upstream at once; eight keeps a
// hundred-shard listing quick without letting one caller crowd out others.
const shardReads = 8

// Headers reads the headers of all files of l, in repo, for caller c, pinned
// to l's commit so that a branch moving meanwhile cannot mix two versions.
//
// At most shardReads reads run at once, by as many workers taking shards in
// index order. The first failure ends the whole call: it cancels the reads in
// flight (through a context derived from ctx), no further shard is started,
// and that failure is returned once the reads in flight have stopped. A
// missing shard therefore costs at most shardReads upstream requests however
// many shards the index lists, rather than one per shard.
func (s *Service) Headers(ctx context.Context, c hub.Caller, repo hub.Repo, l Layout) ([]File, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &shardRun{files: make([]File, len(l.Files)), ctx: ctx, cancel: cancel}
	var wg sync.WaitGroup
	for range min(shardReads, len(l.Files)) {
		wg.Go(func() {
			for {
				i, ok := r.take()
				if !ok {
					return
				}
				f, err := s.header(ctx, c, hub.FileRef{Repo: repo, Rev: l.Commit, Path: l.Files[i]})
				if err != nil {
					r.fail(err)
					return
				}
				r.files[i] = f
			}
		})
	}
	wg.Wait()
	if r.err != nil {
		return nil, r.err
	}
	return r.files, nil
}

// shardRun is the shared state of one Headers call: which shard is next, and
// the first failure, which stops the rest.
type shardRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	files  []File // slot i is written only by the worker that took shard i

	mu   sync.Mutex
	next int
	err  error
}

// take hands out the next shard to read, or false once every shard has been
// handed out or the run has failed. A caller that gave up counts as a failure,
// so no shard starts after it.
func (r *shardRun) take() (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil && r.ctx.Err() != nil {
		r.err = r.ctx.Err()
	}
	if r.err != nil || r.next == len(r.files) {
		return 0, false
	}
	r.next++
	return r.next - 1, true
}

// fail records err if it is the run's first failure and cancels the reads
// still in flight; their own errors (mostly the cancellation) are dropped.
func (r *shardRun) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
		r.cancel()
	}
}
