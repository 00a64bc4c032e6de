package hubtest

import (
	"maps"
	"sync"
	"sync/atomic"
)

// Counters is a snapshot of what the hub has served since New or the last
// ResetCounters.
type Counters struct {
	// Requests counts every request to the hub, the CDN and the foreign host.
	Requests int64
	// ResolveRequests counts HEAD and GET on /resolve/, /raw/ and
	// /api/resolve-cache/ (the last is not also an APIRequest).
	ResolveRequests int64
	// CDNRequests counts requests to the CDN.
	CDNRequests int64
	// APIRequests counts the other /api/ requests.
	APIRequests int64
	// XetRequests counts answers that would start a Xet download:
	// /xet-read-token/ calls and xet-fileinfo answers to resolve requests.
	XetRequests int64
	// ForeignRequests counts requests to the foreign host.
	ForeignRequests int64
	// BodyBytes counts file-content bytes written to clients by the CDN,
	// resolve-cache and raw routes (not JSON, redirects or the foreign host).
	BodyBytes int64
	// FramingBytes counts the multipart/byteranges framing (boundaries and
	// part headers) written around file content, which BodyBytes leaves out:
	// upstream bytes that are not the file's.
	FramingBytes int64
	// BytesByPath splits BodyBytes by "{repo}/{path}", where repo is
	// hub.Repo.String() ("datasets/ns/name").
	BytesByPath map[string]int64
	// AuthSeenByCDN and AuthSeenByForeign count requests to those hosts that
	// carried an Authorization header: credentials that leaked.
	AuthSeenByCDN     int64
	AuthSeenByForeign int64
}

// RequestRecord is one request as the hub saw it, logged when it finished.
type RequestRecord struct {
	Method  string
	Host    string // the Host header: tells hub, CDN and foreign host apart
	Path    string // escaped, as received
	Query   string // raw query
	Range   string
	Accept  string
	HadAuth bool
	Status  int   // 0 when the client left before an answer
	Bytes   int64 // body bytes written: file content and framing, or a JSON or error body
}

// maxLog bounds the request log.
const maxLog = 10000

// stats holds the counters. The scalar ones are atomic so handlers never
// contend on them; mu guards the map and the log.
type stats struct {
	requests, resolve, cdn, api, xet, foreign atomic.Int64
	bodyBytes, framing, authCDN, authForeign  atomic.Int64

	mu     sync.Mutex
	byPath map[string]int64
	ring   []RequestRecord // circular once full
	next   int             // where the next record goes once ring is full

	observer atomic.Pointer[func(RequestRecord)] // see SetRequestObserver
}

func (s *stats) reset() {
	for _, c := range []*atomic.Int64{&s.requests, &s.resolve, &s.cdn, &s.api, &s.xet, &s.foreign, &s.bodyBytes, &s.framing, &s.authCDN, &s.authForeign} {
		c.Store(0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byPath = map[string]int64{}
	s.ring = nil
	s.next = 0
}

func (s *stats) addBytes(key string, n int64) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.byPath[key] += n
	s.mu.Unlock()
}

func (s *stats) log(rec RequestRecord) {
	if fn := s.observer.Load(); fn != nil {
		(*fn)(rec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ring) < maxLog {
		s.ring = append(s.ring, rec)
		return
	}
	s.ring[s.next] = rec
	s.next = (s.next + 1) % maxLog
}

// Counters returns a snapshot of the counters.
func (h *Hub) Counters() Counters {
	s := &h.stats
	c := Counters{
		Requests:          s.requests.Load(),
		ResolveRequests:   s.resolve.Load(),
		CDNRequests:       s.cdn.Load(),
		APIRequests:       s.api.Load(),
		XetRequests:       s.xet.Load(),
		ForeignRequests:   s.foreign.Load(),
		BodyBytes:         s.bodyBytes.Load(),
		FramingBytes:      s.framing.Load(),
		AuthSeenByCDN:     s.authCDN.Load(),
		AuthSeenByForeign: s.authForeign.Load(),
	}
	s.mu.Lock()
	c.BytesByPath = maps.Clone(s.byPath)
	s.mu.Unlock()
	return c
}

// ResetCounters zeroes the counters, the request log and FaultCounts.
func (h *Hub) ResetCounters() {
	h.stats.reset()
	h.faults.mu.Lock()
	clear(h.faults.counts)
	clear(h.faults.byPath)
	h.faults.mu.Unlock()
}

// Requests returns the request log, oldest first: the last 10,000 requests
// that finished.
func (h *Hub) Requests() []RequestRecord {
	s := &h.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RequestRecord, 0, len(s.ring))
	out = append(out, s.ring[s.next:]...)
	return append(out, s.ring[:s.next]...)
}
