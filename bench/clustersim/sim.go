// Package clustersim replays the shared tier's claim protocol
// (internal/sharedfill) for clusters larger than one machine can run: N
// nodes starting the same model at once, each reading it chunk by chunk with
// a fixed number of concurrent fills, against a store with S3's published
// per-prefix request limits, per-connection throughput and first-byte
// latency, and a hub that caps each connection.
//
// It is a model, not a load test: it knows the protocol's steps (claim by
// conditional create, owner fetches from the hub and puts, waiters poll the
// chunk and the claim on sharedfill's schedule, 20 ms growing by 1.5× to 1 s,
// then read the chunk whole), the byte and request costs of each, and queues
// requests that exceed a prefix's rate, as S3's SlowDown answers and the
// SDK's retries do in effect. It does not model CPU, memory or TCP dynamics;
// its times are bounds set by the links and the request limits.
package clustersim

import (
	"container/heap"
	"fmt"
	"math"
	"time"
)

// Params describe one simulated start.
type Params struct {
	Nodes     int
	Files     int   // the model's shards (files)
	FileSize  int64 // bytes per file
	ChunkSize int64
	// Conns is the concurrent fills per node (upstream-parallelism).
	Conns int
	// HubConnRate is the hub's (CDN's) cap per connection, bytes/s;
	// HubLatency its first-byte latency.
	HubConnRate float64
	HubLatency  time.Duration
	// StoreConnRate is a store connection's throughput, bytes/s (S3: about
	// 85-90 MB/s); StoreLatency its first-byte latency.
	StoreConnRate float64
	StoreLatency  time.Duration
	// GETRate and PUTRate are the store's request limits per prefix per
	// second (S3: 5,500 GET/HEAD, 3,500 PUT/COPY/POST/DELETE); 0: none.
	GETRate, PUTRate float64
	// NodeRate caps one node's network, bytes/s, shared by its Conns; 0:
	// none.
	NodeRate float64
	// FallbackAfter is sharedfill's: a waiting reader without a byte for
	// this long reads its bytes from the hub until the chunk lands (those
	// bytes count upstream); 0: never.
	FallbackAfter time.Duration
	// Shards spreads chunks over this many key prefixes by a hash of the
	// chunk, as sharedfill's key layout v4 does (256); 0 keeps a file's
	// chunks under one prefix, as layout v3 did.
	Shards int
}

// Result is what a simulated start cost.
type Result struct {
	LastNode        time.Duration // the last node has every chunk
	FirstNode       time.Duration
	UpstreamBytes   int64
	StoreReadBytes  int64
	StoreWriteBytes int64
	GETs, PUTs      int64 // store requests, all prefixes (HEAD counts as GET)
	// PeakGETs and PeakPUTs are the highest requests per second seen on
	// one prefix in any one-second window.
	PeakGETs, PeakPUTs int
	// Throttled is the total time requests waited for a prefix's rate.
	Throttled time.Duration
	// LongWaits counts chunk waits longer than FallbackAfter, whose
	// readers fell back to the hub for their bytes until the chunk landed
	// (FallbackBytes of UpstreamBytes).
	LongWaits     int64
	FallbackBytes int64
	// Bound names what limited the run.
	Bound string
}

// Model is the model's size in bytes.
func (p Params) Model() int64 { return int64(p.Files) * p.FileSize }

func (p Params) chunksPerFile() int64 { return (p.FileSize + p.ChunkSize - 1) / p.ChunkSize }

// chunkBytes is the size of global chunk c (a file's last is short).
func (p Params) chunkBytes(c int64) int64 {
	idx := c % p.chunksPerFile()
	return min(p.ChunkSize, p.FileSize-idx*p.ChunkSize)
}

// event kinds.
const (
	evNext    = iota // a node's fill slot is free: take the next chunk
	evClaimed        // an owner's create answered: fetch from the hub
	evFetched        // the owner has the chunk: put it
	evLanded         // the chunk is in the store
	evPoll           // a waiter polls
	evRead           // a node has read a chunk from the store
)

type event struct {
	at    time.Duration
	kind  int
	node  int
	chunk int64
	wait  time.Duration // a waiter's current pause
	since time.Duration // when the waiter began waiting
}

type events []event

func (e events) Len() int            { return len(e) }
func (e events) Less(i, j int) bool  { return e[i].at < e[j].at }
func (e events) Swap(i, j int)       { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x interface{}) { *e = append(*e, x.(event)) }
func (e *events) Pop() interface{} {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// bucket counts one prefix's requests of one class per second and holds
// it to its rate: a request over a second's limit is sent at the start of
// the next second that has room (S3 answers it SlowDown, and the SDK's
// retries send it later, in effect the same). Windows rather than a queue,
// so requests may be booked ahead of the event being processed (a GET a
// latency after a PUT) without delaying requests of earlier times.
type bucket struct {
	rate   float64
	counts map[int64]int
}

func (b *bucket) take(at time.Duration) (time.Duration, time.Duration) {
	w := int64(at / time.Second)
	start := at
	if b.rate > 0 {
		for float64(b.counts[w]) >= b.rate {
			w++
			start = time.Duration(w) * time.Second
		}
	}
	b.counts[w]++
	return start, start - at
}

func (b *bucket) peak() int {
	m := 0
	for _, n := range b.counts {
		m = max(m, n)
	}
	return m
}

// chunk state.
const (
	free = iota
	claimed
	landed
)

type sim struct {
	p       Params
	q       events
	state   []int8 // per global chunk
	gets    map[int64]*bucket
	puts    map[int64]*bucket
	pos     []int64 // per node: the next chunk it takes
	left    []int64 // per node: chunks not yet read
	done    []time.Duration
	total   int64
	res     Result
	hubXfer time.Duration
	stXfer  time.Duration
	hubRate float64 // per connection, bytes/s
}

// Run simulates p.
func Run(p Params) (Result, error) {
	if p.Nodes < 1 || p.Files < 1 || p.FileSize < 1 || p.ChunkSize < 1 || p.Conns < 1 || p.HubConnRate <= 0 || p.StoreConnRate <= 0 {
		return Result{}, fmt.Errorf("clustersim: incomplete parameters %+v", p)
	}
	s := &sim{p: p, gets: map[int64]*bucket{}, puts: map[int64]*bucket{}}
	s.total = int64(p.Files) * p.chunksPerFile()
	s.state = make([]int8, s.total)
	s.pos = make([]int64, p.Nodes)
	s.left = make([]int64, p.Nodes)
	s.done = make([]time.Duration, p.Nodes)
	perConn := func(r float64) float64 {
		if p.NodeRate > 0 {
			r = math.Min(r, p.NodeRate/float64(p.Conns))
		}
		return r
	}
	s.hubRate = perConn(p.HubConnRate)
	s.hubXfer = time.Duration(float64(p.ChunkSize) / s.hubRate * float64(time.Second))
	s.stXfer = time.Duration(float64(p.ChunkSize) / perConn(p.StoreConnRate) * float64(time.Second))
	for n := range p.Nodes {
		s.left[n] = s.total
		for range min(int64(p.Conns), s.total) {
			heap.Push(&s.q, event{at: 0, kind: evNext, node: n})
		}
	}
	for s.q.Len() > 0 {
		s.step(heap.Pop(&s.q).(event))
	}
	s.finish()
	return s.res, nil
}

func (s *sim) prefix(c int64) int64 {
	if s.p.Shards > 0 {
		// splitmix64: a fair hash of the chunk, as sha256 is in the layout.
		z := uint64(c) + 0x9e3779b97f4a7c15
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return int64((z ^ z>>31) % uint64(s.p.Shards))
	}
	return c / s.p.chunksPerFile()
}

func (s *sim) bucketOf(m map[int64]*bucket, rate float64, c int64) *bucket {
	k := s.prefix(c)
	b := m[k]
	if b == nil {
		b = &bucket{rate: rate, counts: map[int64]int{}}
		m[k] = b
	}
	return b
}

// get issues a GET-class request on c's prefix at at and returns when it
// is sent.
func (s *sim) get(c int64, at time.Duration) time.Duration {
	start, waited := s.bucketOf(s.gets, s.p.GETRate, c).take(at)
	s.res.GETs++
	s.res.Throttled += waited
	return start
}

func (s *sim) put(c int64, at time.Duration) time.Duration {
	start, waited := s.bucketOf(s.puts, s.p.PUTRate, c).take(at)
	s.res.PUTs++
	s.res.Throttled += waited
	return start
}

func (s *sim) push(e event) { heap.Push(&s.q, e) }

func (s *sim) step(e event) {
	switch e.kind {
	case evNext:
		n := e.node
		if s.pos[n] >= s.total {
			return
		}
		c := s.pos[n]
		s.pos[n]++
		if s.state[c] == landed { // in the store: read it
			s.read(n, c, e.at)
			return
		}
		// A GET that misses, then a claim.
		at := s.get(c, e.at) + s.p.StoreLatency
		switch s.state[c] {
		case landed:
			s.read(n, c, at)
		case free: // claim it: a conditional create
			at := s.put(c, at) + s.p.StoreLatency
			s.state[c] = claimed
			s.push(event{at: at, kind: evClaimed, node: n, chunk: c})
		case claimed: // the create says exists; read the claim, then poll
			at := s.put(c, at) + s.p.StoreLatency
			at = s.get(c, at) + s.p.StoreLatency
			s.push(event{at: at + 20*time.Millisecond, kind: evPoll, node: n, chunk: c, wait: 20 * time.Millisecond, since: e.at})
		}
	case evClaimed: // the owner fetches from the hub; its client reads that
		s.res.UpstreamBytes += s.p.chunkBytes(e.chunk)
		s.push(event{at: e.at + s.p.HubLatency + s.hubXfer, kind: evFetched, node: e.node, chunk: e.chunk})
	case evFetched: // the owner's fill is done; its flight puts the chunk
		at := s.put(e.chunk, e.at) + s.p.StoreLatency + s.stXfer
		s.res.StoreWriteBytes += s.p.chunkBytes(e.chunk)
		s.push(event{at: at, kind: evLanded, node: e.node, chunk: e.chunk})
		s.filled(e.node, e.at)
	case evLanded:
		s.state[e.chunk] = landed
		s.put(e.chunk, e.at) // the claim's delete
	case evPoll: // HEAD the chunk and GET the claim
		at := s.get(e.chunk, e.at) + s.p.StoreLatency
		if s.state[e.chunk] == landed {
			if f := s.p.FallbackAfter; f > 0 && e.at-e.since > f {
				// Reading from the hub since since+f, at its per-connection
				// rate, until this poll saw the chunk.
				n := min(s.p.chunkBytes(e.chunk), int64((e.at-e.since-f).Seconds()*s.hubRate))
				s.res.LongWaits++
				s.res.FallbackBytes += n
				s.res.UpstreamBytes += n
			}
			s.read(e.node, e.chunk, at)
			return
		}
		at = s.get(e.chunk, at) + s.p.StoreLatency
		w := min(e.wait*3/2, time.Second)
		s.push(event{at: at + e.wait, kind: evPoll, node: e.node, chunk: e.chunk, wait: w, since: e.since})
	case evRead:
		s.filled(e.node, e.at)
	}
}

// read GETs chunk c whole for node n.
func (s *sim) read(n int, c int64, at time.Duration) {
	start := s.get(c, at)
	s.res.StoreReadBytes += s.p.chunkBytes(c)
	s.push(event{at: start + s.p.StoreLatency + s.stXfer, kind: evRead, node: n, chunk: c})
}

// filled counts a chunk of node n done at at and frees its slot.
func (s *sim) filled(n int, at time.Duration) {
	s.left[n]--
	if s.left[n] == 0 {
		s.done[n] = at
	}
	s.push(event{at: at, kind: evNext, node: n})
}

func (s *sim) finish() {
	r := &s.res
	r.FirstNode = time.Duration(math.MaxInt64)
	for _, d := range s.done {
		r.LastNode = max(r.LastNode, d)
		r.FirstNode = min(r.FirstNode, d)
	}
	for _, b := range s.gets {
		r.PeakGETs = max(r.PeakGETs, b.peak())
	}
	for _, b := range s.puts {
		r.PeakPUTs = max(r.PeakPUTs, b.peak())
	}
	// What bounds it: the ideal time of one node alone, its fills one
	// after another at the per-connection rates, against the run's.
	chunks := float64(s.total) / float64(s.p.Conns)
	alone := time.Duration(chunks * float64(s.p.HubLatency+s.hubXfer))
	fromStore := time.Duration(chunks * float64(s.p.StoreLatency+s.stXfer))
	switch {
	case r.Throttled > r.LastNode*time.Duration(s.p.Nodes)/10:
		r.Bound = "store request rate per prefix"
	case fromStore > alone:
		r.Bound = "store per-connection throughput"
	default:
		r.Bound = "hub per-connection throughput"
	}
}
