package sharedfill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// claimBody is a claim object's content. Waiters compare it whole: any
// change (a beat) shows the owner alive.
type claimBody struct {
	Owner string    `json:"owner"`
	Beat  int64     `json:"beat"`
	Time  time.Time `json:"time"` // the owner's clock, for claims long dead
}

// heldClaim is a claim this node won.
type heldClaim struct{ gen int }

var (
	// errWaitedTooLong: the chunk's owner is alive but has not delivered
	// within MaxWait.
	errWaitedTooLong = errors.New("sharedfill: waited too long for another node's chunk")
	// errTooManyGens: claims keep going stale; something is wrong.
	errTooManyGens = errors.New("sharedfill: too many stale claims on one chunk")
)

const (
	// maxGens bounds the takeovers of one chunk.
	maxGens = 32
	// deadAfter is how old (by its owner's clock) a claim must be for a
	// waiter to skip it at once rather than watch it for a lease: a node
	// that starts after its predecessor died mid-chunk need not wait. It
	// allows for this much clock skew between nodes.
	deadAfter = 2 * time.Minute
	// The pause between polls for a chunk grows from pollMin to pollMax.
	pollMin = 20 * time.Millisecond
	pollMax = time.Second
)

// acquire decides who fetches the chunk of f: this node (a held claim, and
// whether it took the chunk over from an owner that went silent), or
// another node whose copy has landed (landed). An error is the store
// failing, the context ending, errWaitedTooLong or errTooManyGens.
func (s *Sharer) acquire(ctx context.Context, f *flight) (held *heldClaim, landed, tookOver bool, err error) {
	begun := time.Now()
	var (
		gen      int
		stale    bool      // gen replaces a claim that went silent
		watching = -1      // the generation seen is of
		seen     []byte    // the claim as last read
		changed  time.Time // when seen last changed, by our clock
		pause    = pollMin
	)
	for {
		if gen >= maxGens {
			return nil, false, false, errTooManyGens
		}
		if time.Since(begun) > s.opts.MaxWait {
			return nil, false, false, errWaitedTooLong
		}
		body, _ := json.Marshal(claimBody{Owner: s.opts.Owner, Time: time.Now()})
		err := s.call(ctx, func(ctx context.Context) error { return s.objs.Create(ctx, s.claimKey(f.id, gen), body) })
		if err == nil {
			// It may have landed between the miss that started this
			// flight and the claim.
			if ok, err := s.landed(ctx, f); err == nil && ok {
				s.endClaims(ctx, f.id, gen)
				return nil, true, false, nil
			}
			return &heldClaim{gen: gen}, false, stale, nil
		}
		if !errors.Is(err, sharedstore.ErrExists) {
			return nil, false, false, err
		}
		// Someone holds it: wait for the chunk while the claim lives.
		for {
			cur, err := s.readClaim(ctx, f.id, gen)
			if errors.Is(err, sharedstore.ErrNotFound) {
				// Released: delivered (then it has landed), or given up.
				if ok, err := s.landed(ctx, f); err != nil || ok {
					return nil, ok, false, err
				}
				break // claim it again
			}
			if err != nil {
				return nil, false, false, err
			}
			now := time.Now()
			var cb claimBody
			if json.Unmarshal(cur, &cb) == nil && now.Sub(cb.Time) > s.opts.Lease+deadAfter {
				s.log.Info("shared store: skipping a long-dead claim", "key", s.claimKey(f.id, gen), "owner", cb.Owner)
				gen, stale = gen+1, true
				break
			}
			if watching != gen || !bytes.Equal(cur, seen) {
				watching, seen, changed = gen, cur, now
			} else if now.Sub(changed) > s.opts.Lease {
				s.log.Warn("shared store: a chunk's owner went silent; taking it over", "key", s.claimKey(f.id, gen), "owner", cb.Owner)
				gen, stale = gen+1, true
				break
			}
			if err := sleep(ctx, jitter(pause)); err != nil {
				return nil, false, false, err
			}
			pause = min(pause*3/2, pollMax)
			if ok, err := s.landed(ctx, f); err != nil || ok {
				return nil, ok, false, err
			}
			if time.Since(begun) > s.opts.MaxWait {
				return nil, false, false, errWaitedTooLong
			}
		}
	}
}

// call runs one store call without a body under OpTimeout and records its
// outcome in the breaker.
func (s *Sharer) call(ctx context.Context, fn func(context.Context) error) error {
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	err := fn(octx)
	if err != nil && ctx.Err() == nil && errors.Is(octx.Err(), context.DeadlineExceeded) {
		err = errStoreSlow
	}
	s.observe(ctx, err)
	return err
}

// landed reports whether the chunk of f is in the store, whole (its seal is
// checked when read). An object of the wrong size is deleted (it can only be
// torn or tampered with).
func (s *Sharer) landed(ctx context.Context, f *flight) (bool, error) {
	var o sharedstore.Object
	key := s.chunkKey(f.id)
	err := s.call(ctx, func(ctx context.Context) (err error) {
		o, err = s.objs.Stat(ctx, key)
		return err
	})
	switch {
	case errors.Is(err, sharedstore.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	case o.Size != f.size+trailerLen:
		s.opts.OnReject(RejectSize)
		s.log.Warn("shared store: chunk object has the wrong size; deleting it", "key", key, "size", o.Size, "want", f.size+trailerLen)
		return false, s.call(ctx, func(ctx context.Context) error { return s.objs.Delete(ctx, key) })
	}
	return true, nil
}

// maxClaimBytes bounds what is read of a claim object.
const maxClaimBytes = 4 << 10

// readClaim returns a claim object's content.
func (s *Sharer) readClaim(ctx context.Context, id chunkID, gen int) ([]byte, error) {
	var b []byte
	err := s.call(ctx, func(ctx context.Context) error {
		body, _, err := s.objs.ReadRange(ctx, s.claimKey(id, gen), 0, -1)
		if err != nil {
			return err
		}
		defer body.Close()
		b, err = io.ReadAll(io.LimitReader(body, maxClaimBytes))
		return err
	})
	return b, err
}

// heartbeat renews a held claim every Lease/3 until the returned stop is
// called. A renewal that fails is only logged: the worst outcome is that
// another node takes the chunk over and fetches it too.
func (s *Sharer) heartbeat(ctx context.Context, id chunkID, held *heldClaim) (stop func()) {
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.opts.Lease / 3)
		defer t.Stop()
		for beat := int64(1); ; beat++ {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			body, _ := json.Marshal(claimBody{Owner: s.opts.Owner, Beat: beat, Time: time.Now()})
			if err := s.call(hctx, func(ctx context.Context) error { return s.objs.Put(ctx, s.claimKey(id, held.gen), body) }); err != nil && hctx.Err() == nil {
				s.log.Warn("shared store: renewing a chunk claim failed", "key", s.claimKey(id, held.gen), "err", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// endClaims deletes the claims of a chunk up to gen, whether it was
// delivered or given up: waiters then see at once that the chunk landed or
// that it is free to claim. It runs even when ctx has ended (a node shutting
// down releases what it held), within OpTimeout.
func (s *Sharer) endClaims(ctx context.Context, id chunkID, gen int) {
	ctx = context.WithoutCancel(ctx)
	for g := gen; g >= 0; g-- {
		if err := s.call(ctx, func(ctx context.Context) error { return s.objs.Delete(ctx, s.claimKey(id, g)) }); err != nil {
			s.log.Debug("shared store: deleting a claim", "key", s.claimKey(id, g), "err", err)
			return
		}
	}
}

// jitter spreads d by ±20%, so waiters do not poll in step.
func jitter(d time.Duration) time.Duration {
	return d*4/5 + rand.N(d*2/5+1)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
