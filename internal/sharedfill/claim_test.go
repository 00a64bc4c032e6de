package sharedfill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// Review (shared tier under real cluster conditions): a node whose clock
// ran more than 2m15s behind had every live claim of it taken over, since
// waiters judged a claim's age by the time its owner wrote into it. Ages
// are now the store's: a claim rewritten moments ago is live, whatever its
// owner's clock says.
func TestSkewedOwnersLiveClaimIsWaitedFor(t *testing.T) {
	store := fileStore(t)
	data := randomData(11, testChunk)
	up := &upstream{data: data}
	var c claims
	s := newSharer(t, store, &c, Options{Lease: 200 * time.Millisecond})
	ctx := context.Background()
	key := s.claimKey(chunkID{etagOf(11), 0}, 0)
	behind := time.Now().Add(-10 * time.Minute) // the owner's clock
	body := func(beat int64) []byte {
		b, _ := json.Marshal(claimBody{Owner: "skewed", Beat: beat, Time: behind.Add(time.Duration(beat) * 30 * time.Millisecond)})
		return b
	}
	if err := store.Create(ctx, key, body(0)); err != nil {
		t.Fatal(err)
	}
	go func() { // a live owner: it beats, then gives the chunk up
		for beat := int64(1); beat <= 15; beat++ {
			time.Sleep(30 * time.Millisecond)
			store.Put(ctx, key, body(beat))
		}
		store.Delete(ctx, key)
	}()
	if got := read(t, s.Origin(etagOf(11), testChunk, up), 0, testChunk); !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	if c.get(ClaimTakenOver) != 0 || c.get(ClaimWon) != 1 {
		t.Fatalf("claims %v: the live claim of a node with a skewed clock was taken over", c.n)
	}
}

// lostReply is a store whose first reply to each claim's create is lost:
// the create happens, and the SDK's retry is answered 412, ErrExists.
type lostReply struct {
	Objects
	mu   sync.Mutex
	seen map[string]bool
}

func (l *lostReply) Create(ctx context.Context, key string, data []byte) error {
	err := l.Objects.Create(ctx, key, data)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && isKind(key, kindClaim) && !l.seen[key] {
		l.seen[key] = true
		return sharedstore.ErrExists
	}
	return err
}

// Review: a lost reply to a successful claim create made the node wait out
// the lease on its own claim (16.2 s instead of 0.1 s), then "take it
// over" from itself.
func TestLostCreateReplyIsOurClaim(t *testing.T) {
	store := &lostReply{Objects: fileStore(t), seen: map[string]bool{}}
	data := randomData(12, 2*testChunk)
	up := &upstream{data: data}
	var c claims
	s := newSharer(t, store, &c, Options{Lease: 300 * time.Millisecond})
	if got := read(t, s.Origin(etagOf(12), int64(len(data)), up), 0, int64(len(data))); !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	if c.get(ClaimWon) != 2 || c.get(ClaimTakenOver) != 0 || up.bytes.Load() != int64(len(data)) {
		t.Fatalf("claims %v, upstream %d bytes: want both chunks won at once", c.n, up.bytes.Load())
	}
}

// flaky fails what its flags say.
type flaky struct {
	Objects
	failDeletes atomic.Bool
	hideClaims  atomic.Bool  // reads of claims say not found (a lagging store)
	creates     atomic.Int64 // creates of claims
}

func (f *flaky) Delete(ctx context.Context, key string) error {
	if f.failDeletes.Load() {
		return errDown
	}
	return f.Objects.Delete(ctx, key)
}

func (f *flaky) Create(ctx context.Context, key string, data []byte) error {
	if isKind(key, kindClaim) {
		f.creates.Add(1)
	}
	return f.Objects.Create(ctx, key, data)
}

func (f *flaky) ReadRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, int64, error) {
	if f.hideClaims.Load() && isKind(key, kindClaim) {
		return nil, 0, sharedstore.ErrNotFound
	}
	return f.Objects.ReadRange(ctx, key, off, n)
}

func (f *flaky) Stat(ctx context.Context, key string) (sharedstore.Object, error) {
	if f.hideClaims.Load() && isKind(key, kindClaim) {
		return sharedstore.Object{}, sharedstore.ErrNotFound
	}
	return f.Objects.Stat(ctx, key)
}

// Review: after a store outage, claims whose deletes had failed stayed
// for good, and every node that wanted those chunks waited out a lease on
// each (a file read in 5.8 s took 37.1 s). They are deleted once the store
// answers again.
func TestOrphanedClaimsDeletedWhenStoreReturns(t *testing.T) {
	raw := fileStore(t)
	store := &flaky{Objects: raw}
	store.failDeletes.Store(true)
	data := randomData(13, testChunk)
	s := newSharer(t, store, nil, Options{})
	if got := read(t, s.Origin(etagOf(13), testChunk, &upstream{data: data}), 0, testChunk); !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	key := s.claimKey(chunkID{etagOf(13), 0}, 0)
	// The reader has its bytes before the flight ends its claim.
	for deadline := time.Now().Add(10 * time.Second); s.Orphans() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d orphans, want 1", s.Orphans())
		}
	}
	if _, err := raw.Stat(context.Background(), key); err != nil {
		t.Fatalf("the claim whose delete failed: %v; want it still in the store", err)
	}
	store.failDeletes.Store(false) // the store is back
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := raw.Stat(context.Background(), key)
		if errors.Is(err, sharedstore.ErrNotFound) && s.Orphans() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the orphaned claim is still there 20 s after the store came back (stat: %v, orphans %d)", err, s.Orphans())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Review: a store whose creates say "exists" while its reads say "not
// found" (a lagging store, NFS negative caching) made a waiter spin at 450
// requests a second on one chunk. It backs off, and treats the claim as
// held: it waits for the chunk rather than fetching it too.
func TestLaggingStoreDoesNotSpin(t *testing.T) {
	raw := fileStore(t)
	data := randomData(14, testChunk)
	gate := make(chan struct{})
	owner := newSharer(t, raw, nil, Options{})
	var ownerClaimed sync.WaitGroup
	ownerClaimed.Add(1)
	go func() {
		ownerClaimed.Done()
		read(t, owner.Origin(etagOf(14), testChunk, &upstream{data: data, gate: gate}), 0, testChunk)
	}()
	ownerClaimed.Wait()
	key := owner.claimKey(chunkID{etagOf(14), 0}, 0)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := raw.Stat(context.Background(), key); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("the owner never claimed the chunk")
		}
	}
	lagging := &flaky{Objects: raw}
	lagging.hideClaims.Store(true)
	var c claims
	waiter := newSharer(t, lagging, &c, Options{FallbackAfter: time.Minute})
	up := &upstream{data: data}
	go func() { time.Sleep(time.Second); close(gate) }()
	if got := read(t, waiter.Origin(etagOf(14), testChunk, up), 0, testChunk); !bytes.Equal(got, data) {
		t.Fatal("bytes differ")
	}
	if n := lagging.creates.Load(); n > 40 {
		t.Errorf("%d claim creates in about a second of a lagging store; want a backoff (a few dozen at most)", n)
	}
	if up.bytes.Load() != 0 || c.get(ClaimWaited) != 1 {
		t.Errorf("the waiter fetched %d bytes itself, claims %v; want it to wait for the held chunk", up.bytes.Load(), c.n)
	}
}
