package sharedfill

import (
	"context"
	"errors"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// Claims this node failed to delete (the store was down or slow when it
// released them) are orphans: every other node that wants their chunks
// would wait out a lease on each. Found by a review: after a MinIO restart
// nine claims stayed and a fresh node took 37 s, in waves of 15 s lease
// waits, for a file it reads in 6. The reaper deletes them as soon as the
// store answers again.

// orphan records a claim whose delete failed and starts the reaper if it
// is not running.
func (s *Sharer) orphan(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	if s.orphans == nil {
		s.orphans = map[string]struct{}{}
	}
	s.orphans[key] = struct{}{}
	if !s.reaping {
		s.reaping = true
		s.wg.Go(s.reap)
	}
}

// reap retries the orphans' deletes, with a pause doubling from minPause to
// maxPause while the store keeps failing, until none is left or the Sharer
// closes; on Close it makes one last attempt within OpTimeout.
func (s *Sharer) reap() {
	pause := minPause
	for {
		closing := sleep(s.ctx, jitter(pause)) != nil
		ctx := s.ctx
		if closing {
			ctx = context.WithoutCancel(s.ctx)
		}
		if s.reapOnce(ctx) == 0 || closing {
			return
		}
		pause = min(2*pause, maxPause)
	}
}

// reapOnce tries to delete every orphan once and returns how many are left;
// with none left it marks the reaper stopped.
func (s *Sharer) reapOnce(ctx context.Context) int {
	s.mu.Lock()
	keys := make([]string, 0, len(s.orphans))
	for k := range s.orphans {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	for _, key := range keys {
		err := s.call(ctx, func(ctx context.Context) error { return s.objs.Delete(ctx, key) })
		if err != nil && !errors.Is(err, sharedstore.ErrNotFound) {
			break // the store still fails: the rest wait for the next round
		}
		s.mu.Lock()
		delete(s.orphans, key)
		s.mu.Unlock()
		s.log.Debug("shared store: deleted a claim left behind by an outage", "key", key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	left := len(s.orphans)
	if left == 0 {
		s.reaping = false
	}
	return left
}

// Orphans reports how many claims this node has left to delete.
func (s *Sharer) Orphans() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orphans)
}
