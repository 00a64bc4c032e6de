package sharedfill

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// claimBody is a claim object's content. Waiters compare it whole: any
// change (a beat) shows the owner alive, and Have growing shows it making
// progress.
type claimBody struct {
	Owner string `json:"owner"`
	// Nonce is the claiming attempt's: a create that succeeded but whose
	// reply was lost is retried (by the SDK) and answered "exists", and the
	// nonce read back tells our own claim from another's (a file:// store
	// makes the same check with link(2) itself).
	Nonce string `json:"nonce,omitempty"`
	Beat  int64  `json:"beat"`
	// Have is how many bytes of the chunk the owner has fetched.
	Have int64 `json:"have"`
	// Time is the writer's clock, for people reading the store. It is never
	// compared with another node's clock: nodes' clocks may be skewed.
	Time time.Time `json:"time"`
}

// heldClaim is a claim this node won.
type heldClaim struct {
	gen   int
	nonce string
}

var (
	// errWaitedTooLong: the chunk's owner is alive but has fetched nothing
	// more for MaxWait.
	errWaitedTooLong = errors.New("sharedfill: another node's chunk made no progress")
	// errTooManyGens: claims keep going stale; something is wrong.
	errTooManyGens = errors.New("sharedfill: too many stale claims on one chunk")
)

const (
	// maxGens bounds the takeovers of one chunk.
	maxGens = 32
	// deadLeases is how many leases old, by the store's own clock
	// (storeclock.go), a claim must be for a waiter to skip it at once
	// rather than watch it for a lease: a node that starts after its
	// predecessor died mid-chunk need not wait. A live owner rewrites its
	// claim every Lease/3.
	deadLeases = 2
	// The pause between polls for a chunk grows from pollMin to pollMax.
	pollMin = 20 * time.Millisecond
	pollMax = time.Second
)

// waitState is what a waiter has seen of one chunk's claims.
type waitState struct {
	gen        int
	stale      bool      // gen replaces a claim that went silent
	watching   int       // the generation seen is of; -1: none yet
	seen       []byte    // the claim as last read
	changed    time.Time // when seen last changed, by our clock
	have       int64     // the owner's progress as last read
	progressed time.Time // when have last grew (or the claim was first seen)
	pause      time.Duration
}

// acquire decides who fetches the chunk of f: this node (a held claim, and
// whether it took the chunk over from an owner that went silent), or
// another node whose copy has landed (landed). An error is the store
// failing, the context ending, errWaitedTooLong or errTooManyGens.
func (s *Sharer) acquire(ctx context.Context, f *flight) (held *heldClaim, landed, tookOver bool, err error) {
	w := waitState{watching: -1, pause: pollMin}
	for {
		if w.gen >= maxGens {
			return nil, false, false, errTooManyGens
		}
		nonce := newNonce()
		body, _ := json.Marshal(claimBody{Owner: s.opts.Owner, Nonce: nonce, Time: time.Now()})
		err := s.call(ctx, func(ctx context.Context) error { return s.objs.Create(ctx, s.claimKey(f.id, w.gen), body) })
		if errors.Is(err, sharedstore.ErrExists) && s.ours(ctx, f.id, w.gen, nonce) {
			err = nil // our create landed; only its reply was lost
		}
		if err == nil {
			// It may have landed between the miss that started this
			// flight and the claim.
			if ok, err := s.landed(ctx, f); err == nil && ok {
				s.endClaims(ctx, f.id, w.gen)
				return nil, true, false, nil
			}
			return &heldClaim{gen: w.gen, nonce: nonce}, false, w.stale, nil
		}
		if !errors.Is(err, sharedstore.ErrExists) {
			return nil, false, false, err
		}
		// Someone holds it: wait for the chunk while the claim lives.
		landed, err := s.watch(ctx, f, &w)
		if err != nil || landed {
			return nil, landed, false, err
		}
	}
}

// watch waits on the claim of generation w.gen until the chunk lands
// (true), the claim is released or goes silent (false: claim w.gen, which
// watch may have advanced, again), or the owner stops making progress
// (errWaitedTooLong).
func (s *Sharer) watch(ctx context.Context, f *flight, w *waitState) (bool, error) {
	for {
		cur, err := s.readClaim(ctx, f.id, w.gen)
		if errors.Is(err, sharedstore.ErrNotFound) {
			// Released: delivered (then it has landed), or given up. Or
			// the store's reads lag its creates (eventual consistency,
			// NFS negative caching): the create said it exists. Either
			// way claim again, after a pause, so a lagging store is not
			// asked hundreds of times a second; while it stays so, the
			// claim is held by someone and the wait goes on (MaxWait).
			if ok, err := s.landed(ctx, f); err != nil || ok {
				return ok, err
			}
			if w.watching != w.gen {
				w.watching, w.seen, w.changed, w.progressed = w.gen, nil, time.Now(), time.Now()
			}
			if time.Since(w.progressed) > s.opts.MaxWait {
				return false, errWaitedTooLong
			}
			return false, s.pauseAfter(ctx, w)
		}
		if err != nil {
			return false, err
		}
		now := time.Now()
		var cb claimBody
		parsed := json.Unmarshal(cur, &cb) == nil
		switch {
		case w.watching != w.gen:
			if s.longDead(ctx, f.id, w.gen) {
				s.log.Info("shared store: skipping a long-dead claim", "key", s.claimKey(f.id, w.gen), "owner", cb.Owner)
				w.gen, w.stale = w.gen+1, true
				return false, nil
			}
			w.watching, w.seen, w.changed, w.have, w.progressed = w.gen, cur, now, cb.Have, now
		case !bytes.Equal(cur, w.seen):
			w.seen, w.changed = cur, now
			if parsed && cb.Have > w.have {
				w.have, w.progressed = cb.Have, now
			}
		case now.Sub(w.changed) > s.opts.Lease:
			s.log.Warn("shared store: a chunk's owner went silent; taking it over", "key", s.claimKey(f.id, w.gen), "owner", cb.Owner)
			w.gen, w.stale = w.gen+1, true
			return false, nil
		}
		if now.Sub(w.progressed) > s.opts.MaxWait {
			return false, errWaitedTooLong
		}
		if err := s.pauseAfter(ctx, w); err != nil {
			return false, err
		}
		if ok, err := s.landed(ctx, f); err != nil || ok {
			return ok, err
		}
	}
}

// pauseAfter sleeps the waiter's pause, jittered, and grows it.
func (s *Sharer) pauseAfter(ctx context.Context, w *waitState) error {
	err := sleep(ctx, jitter(w.pause))
	w.pause = min(w.pause*3/2, pollMax)
	return err
}

// ours reports whether the claim of generation gen is the one this node
// created with nonce.
func (s *Sharer) ours(ctx context.Context, id chunkID, gen int, nonce string) bool {
	cur, err := s.readClaim(ctx, id, gen)
	var cb claimBody
	return err == nil && json.Unmarshal(cur, &cb) == nil && cb.Owner == s.opts.Owner && cb.Nonce == nonce
}

// longDead reports whether the claim of generation gen was last written
// deadLeases leases ago or more, by the store's clock.
func (s *Sharer) longDead(ctx context.Context, id chunkID, gen int) bool {
	now, err := s.storeNow(ctx)
	if err != nil {
		return false
	}
	var o sharedstore.Object
	if err := s.call(ctx, func(ctx context.Context) (err error) {
		o, err = s.objs.Stat(ctx, s.claimKey(id, gen))
		return err
	}); err != nil {
		return false
	}
	return now.Sub(o.ModTime) > deadLeases*s.opts.Lease
}

// newNonce is a claiming attempt's nonce.
func newNonce() string {
	var b [8]byte
	crand.Read(b[:])
	return hex.EncodeToString(b[:])
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

// heartbeat renews a held claim every Lease/3, with the bytes fetched so
// far (have), until the returned stop is called. A renewal that fails is
// only logged: the worst outcome is that another node takes the chunk over
// and fetches it too.
func (s *Sharer) heartbeat(ctx context.Context, id chunkID, held *heldClaim, have func() int64) (stop func()) {
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
			body, _ := json.Marshal(claimBody{Owner: s.opts.Owner, Nonce: held.nonce, Beat: beat, Have: have(), Time: time.Now()})
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
// down releases what it held), within OpTimeout. A claim the store fails to
// delete is left to the orphan reaper (orphans.go), which tries again until
// the store answers: left behind, it would hold every other node up for a
// lease.
func (s *Sharer) endClaims(ctx context.Context, id chunkID, gen int) {
	ctx = context.WithoutCancel(ctx)
	for g := gen; g >= 0; g-- {
		key := s.claimKey(id, g)
		err := s.call(ctx, func(ctx context.Context) error { return s.objs.Delete(ctx, key) })
		if err != nil && !errors.Is(err, sharedstore.ErrNotFound) {
			s.log.Debug("shared store: deleting a claim failed; trying again later", "key", key, "err", err)
			s.orphan(key)
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
