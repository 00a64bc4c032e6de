// Package sharedfill shares a cluster's upstream downloads through an object
// store (internal/sharedstore). Each node's cache fills from an Origin that
// this package wraps around the upstream one: a chunk-aligned piece of a
// file (ChunkSize, keyed by the file's content hash and the chunk's index)
// is read from the store when another node already put it there; otherwise
// the nodes that need it agree, through the store alone, on one of them to
// fetch it from upstream and put it in the store, while the others wait
// for it to land.
//
// # Claims
//
// Agreement is by conditional create, the store's one atomic primitive: the
// node whose create of v4/<shard>/claims/<etag>/<chunk size>/<index>/<gen>
// (keys.go) succeeds
// owns the chunk, renews the claim (a beat counter) every Lease/3 while it
// fetches, puts the chunk with a conditional create too, and deletes its
// claim. A waiter polls for the chunk and watches the claim: a claim whose
// content has not changed for Lease, by the waiter's own clock (so clock
// skew between nodes does not matter), was left by a node that died, and the
// waiter takes the chunk over by creating generation gen+1, which again only
// one node can; one last written two leases ago by the store's own clock
// (storeclock.go) is skipped at once. The beat carries the bytes fetched so
// far: an owner that keeps renewing but fetches nothing for MaxWait is given
// up on, one that progresses is waited for however slow, and meanwhile a
// waiting reader that has had no byte for FallbackAfter reads just its own
// bytes from upstream, a block at a time, until the chunk lands. A claim's
// create is recognised as ours by a nonce when its reply was lost, and a
// claim the store failed to delete is deleted once it answers again
// (orphans.go). No coordinator, no node list.
//
// # Trust
//
// Nothing here decides access: callers reach an Origin only after upstream
// (the resolver) allowed them the file, and the store is keyed by content
// hash, so holding bytes never grants any. Nor is the store trusted with
// bytes: whoever can write it (the bucket's credentials, the RWX volume)
// could otherwise make every node serve what they like. A chunk's object is
// sealed with an HMAC under a secret every node holds and the store never
// sees (Options.Secret), bound to the chunk's key, and a node reads a chunk
// whole and checks its seal before handing on any of it (chunkobj.go,
// seal.go): the cache gives range readers a partial file's bytes long
// before it can check the file's hash, so an object changed in the store
// must be caught per chunk. A wrong object (the wrong size, a seal that
// fails, or one the store cannot return) is deleted and the chunk fetched
// anew. What a store writer can still do is delete or withhold chunks
// (nodes then fetch them upstream) and fill the store. Bytes a node got
// wrong from upstream itself are as trusted as in a local partial: the
// cache verifies the whole file's hash before it promotes it, and on a
// mismatch Forget removes the file's chunks, so the next fetch repairs
// them.
//
// # Failure
//
// The store is optional at run time. Any store error opens a breaker (Health)
// for a growing pause during which origins go straight upstream, a chunk the
// store fails to return whole is read from upstream instead, and a store
// that is slow is treated as failing (OpTimeout, StallTimeout). One object
// the store keeps failing to return while it answers for it is not the
// store failing: that object is dropped and its chunk fetched anew.
package sharedfill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	singleflight "github.com/hubproxy/hubproxy/internal/flight"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// Objects is what sharing needs of the store (a *sharedstore.Store).
type Objects interface {
	ReadRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, int64, error)
	Create(ctx context.Context, key string, data []byte) error
	Put(ctx context.Context, key string, data []byte) error
	Stat(ctx context.Context, key string) (sharedstore.Object, error)
	List(ctx context.Context, prefix string, fn func(sharedstore.Object) error) error
	Delete(ctx context.Context, key string) error
}

// Upstream fetches bytes of one file, as cache.Origin does: exactly n bytes
// or an error, with reads failing once ctx ends.
type Upstream interface {
	FetchRange(ctx context.Context, off, n int64) (io.ReadCloser, error)
}

// Claim outcomes, for metrics.
const (
	ClaimWon       = "won"        // this node fetches the chunk
	ClaimWaited    = "waited"     // another node fetched it; this one read it from the store
	ClaimTakenOver = "taken_over" // the owner went silent; this node took the chunk over
)

// Options configure a Sharer. Zero values select the defaults, except
// Secret's.
type Options struct {
	// Secret seals the chunks this node puts and checks those it reads
	// (seal.go): at least MinSecretLen bytes, the same on every node of the
	// cluster, and never stored with the store or its credentials.
	Secret []byte
	// ChunkSize is the unit of sharing; default 8 MiB. Nodes share chunks
	// only with nodes of the same chunk size (it is part of the key).
	ChunkSize int64
	// Lease is how long a claim may go unrenewed before waiters take the
	// chunk over; default 15s.
	Lease time.Duration
	// MaxWait bounds how long a waiter waits on an owner that is alive
	// (renewing its claim) but fetches nothing more of the chunk; past it
	// this node fetches the chunk itself. An owner that makes progress,
	// however slowly, is waited for. Default 30s.
	MaxWait time.Duration
	// FallbackAfter is how long a reader waiting for another node's chunk
	// goes without a byte before it reads what it needs from upstream
	// itself, FallbackBlock at a time, switching to the chunk once it
	// lands: a client is never starved by a slow owner (huggingface_hub
	// gives up on a read after 10 s). Default 3s.
	FallbackAfter time.Duration
	// OpTimeout bounds one store call without a body, and the wait for a
	// body's first bytes; StallTimeout, a body making no progress; a store
	// that is slower counts as failing. Defaults 10s and 10s.
	OpTimeout, StallTimeout time.Duration
	// FetchTimeout bounds fetching one chunk, claim, upstream and put
	// included; default 5 minutes.
	FetchTimeout time.Duration
	// MaxFlights bounds the chunks being claimed, fetched or awaited at
	// once; a chunk fetched by this node is buffered whole (to put it), so
	// this also bounds that memory: MaxFlights × ChunkSize. Past it,
	// reads go straight upstream. Default 16.
	MaxFlights int
	// VerifiedChunkBytes bounds the chunks this node keeps in memory once
	// read from the store and verified, or fetched from upstream itself
	// (verified.go), so that the cache's fills of one chunk, and its
	// readers at once, read it from the store once. Memory: at most this
	// many bytes held, plus, for chunks being read from the store, one
	// buffer per chunk (not per reader); a reader still serving an
	// evicted chunk keeps it alive until it is done. Default 4 ×
	// ChunkSize (32 MiB at 8 MiB chunks): with fills aligned to chunks
	// (cache.Options.AlignFills) a sequential reader needs the one chunk
	// it is in, and a fill not aligned needs two; four leaves room for a
	// few readers at once (range and tensor readers come back to the same
	// chunks) at a small fraction of the MaxFlights × ChunkSize that
	// fetches may buffer. A chunk larger than the bound is shared among
	// its readers at once but not kept. Negative: none kept.
	VerifiedChunkBytes int64
	// Owner names this node in its claims; default host-pid-random.
	Owner string
	// OnClaim, when set, is told each chunk's outcome (ClaimWon, ...).
	OnClaim func(result string)
	// OnReject, when set, is told why each chunk object read from the
	// store was rejected (RejectMAC, ...) and deleted.
	OnReject func(reason string)
	// OnVerified, when set, is told how each chunk wanted from the store
	// was got (VerifiedHit, ...).
	OnVerified func(result string)
	Logger     *slog.Logger
}

// The defaults for zero-valued Options fields.
const (
	DefaultChunkSize    = 8 << 20
	DefaultLease        = 15 * time.Second
	DefaultMaxWait      = 30 * time.Second
	DefaultFallback     = 3 * time.Second
	DefaultOpTimeout    = 10 * time.Second
	DefaultStallTimeout = 10 * time.Second
	DefaultFetchTimeout = 5 * time.Minute
	DefaultMaxFlights   = 16
	// DefaultVerifiedChunks is VerifiedChunkBytes' default in chunks.
	DefaultVerifiedChunks = 4
)

func (o Options) withDefaults() Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	def(&o.Lease, DefaultLease)
	def(&o.MaxWait, DefaultMaxWait)
	def(&o.FallbackAfter, DefaultFallback)
	def(&o.OpTimeout, DefaultOpTimeout)
	def(&o.StallTimeout, DefaultStallTimeout)
	def(&o.FetchTimeout, DefaultFetchTimeout)
	if o.MaxFlights <= 0 {
		o.MaxFlights = DefaultMaxFlights
	}
	if o.VerifiedChunkBytes == 0 {
		o.VerifiedChunkBytes = DefaultVerifiedChunks * o.ChunkSize
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		var rnd [4]byte
		rand.Read(rnd[:])
		o.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(rnd[:]))
	}
	if o.OnClaim == nil {
		o.OnClaim = func(string) {}
	}
	if o.OnReject == nil {
		o.OnReject = func(string) {}
	}
	if o.OnVerified == nil {
		o.OnVerified = func(string) {}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Sharer shares chunks through one store. It is safe for concurrent use.
type Sharer struct {
	objs   Objects
	opts   Options
	log    *slog.Logger
	ctx    context.Context // lifetime: cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // flights
	health *health
	seal   sealer
	// otherSecretSeen: a chunk sealed under another secret was read, and
	// what that means has been logged.
	otherSecretSeen atomic.Bool

	verified *verified                  // chunks kept in memory (verified.go); nil: none
	reads    singleflight.Group[[]byte] // store reads of chunks, one per chunk at a time

	clockMu sync.Mutex // serialises measuring clock
	clock   storeClock

	mu      sync.Mutex
	flights map[chunkID]*flight // guarded by mu
	orphans map[string]struct{} // claim keys to delete (orphans.go); guarded by mu
	reaping bool                // the reaper runs; guarded by mu
}

// New returns a Sharer over objs; it fails only for a Secret too short.
func New(objs Objects, opts Options) (*Sharer, error) {
	seal, err := newSealer(opts.Secret)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Sharer{objs: objs, opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel, seal: seal,
		health: newHealth(time.Now), flights: map[chunkID]*flight{}, verified: newVerified(opts.VerifiedChunkBytes)}, nil
}

// SecretID is the id of this node's secret (SecretID), for its logs.
func (s *Sharer) SecretID() string { return s.seal.idString() }

// Close stops the flights in progress (releasing their claims, so other
// nodes need not wait out the lease) and waits for them.
func (s *Sharer) Close() error {
	s.mu.Lock() // no flight or Discard starts after this
	s.cancel()
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Discard is Forget in the background, for callers that must not block
// (the cache's verification hook), tried again while the store fails. The
// file's chunks in memory are dropped before it returns.
func (s *Sharer) Discard(etag string) {
	s.verified.drop(etag)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	s.wg.Go(func() { s.forgetPersistently(etag) })
}

// forgetTries bounds the attempts of a Discard: with the pause doubling up
// to maxPause, they span about ten minutes of a store that keeps failing.
const forgetTries = 24

// forgetPersistently is Forget, tried again while the store fails. Found
// by the soak: a file that failed verification while the store was down or
// cut off kept its chunks there, so every node's next whole read of it
// failed again and range readers got its bytes, until some read happened to
// fail while the store answered.
func (s *Sharer) forgetPersistently(etag string) {
	pause := minPause
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		n, err := s.Forget(ctx, etag)
		cancel()
		switch {
		case err == nil:
			s.log.Warn("shared store: dropped the chunks of a file that failed verification; it will be fetched anew", "etag", etag, "deleted", n)
			return
		case s.ctx.Err() != nil || try == forgetTries:
			s.log.Warn("shared store: could not drop the chunks of a file that failed verification", "etag", etag, "deleted", n, "err", err)
			return
		}
		s.log.Warn("shared store: could not drop the chunks of a file that failed verification; trying again", "etag", etag, "deleted", n, "err", err)
		if sleep(s.ctx, jitter(pause)) != nil {
			return
		}
		pause = min(2*pause, maxPause)
	}
}

// Probe asks the store whether it answers, updating Health: for a node
// with no traffic to tell it the store came back (or went away).
func (s *Sharer) Probe(ctx context.Context) error {
	err := s.call(ctx, func(ctx context.Context) error {
		_, err := s.objs.Stat(ctx, "v1/probe")
		return err
	})
	if errors.Is(err, sharedstore.ErrNotFound) {
		return nil
	}
	return err
}

// ChunkSize is the unit of sharing.
func (s *Sharer) ChunkSize() int64 { return s.opts.ChunkSize }

// Origin wraps up, the upstream of the file whose content hash is etag, so
// that its ranges are shared through the store. An etag that names no
// content hash cannot be shared: up is returned as it is.
func (s *Sharer) Origin(etag string, size int64, up Upstream) Upstream {
	if hub.ETagKind(etag) == hub.HashUnknown || size <= 0 {
		return up
	}
	return &Origin{s: s, etag: etag, size: size, up: up}
}

// Forget deletes every stored chunk (and claim) of the file with this etag:
// what the cache calls when the file failed verification, since any of its
// chunks may be what was wrong; they are dropped from this node's memory
// too. It returns how many objects it deleted.
func (s *Sharer) Forget(ctx context.Context, etag string) (int, error) {
	if hub.ETagKind(etag) == hub.HashUnknown {
		return 0, fmt.Errorf("sharedfill: %q is not a content hash", etag)
	}
	s.verified.drop(etag) // first: the chunks are as suspect in memory as in the store
	n, _, err := deleteFile(ctx, s.objs, etag, true)
	s.observe(ctx, err)
	return n, err
}

// opCtx bounds one store call by OpTimeout, within ctx.
func (s *Sharer) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.OpTimeout)
}
