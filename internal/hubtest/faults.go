package hubtest

import (
	"maps"
	"strings"
	"sync"
	"time"
)

// Target says which requests a fault may hit.
type Target int

// The fault targets. The zero value, TargetAny, matches requests to the hub
// and the CDN (never the foreign host).
const (
	TargetAny     Target = iota
	TargetCDN            // CDN blob requests
	TargetResolve        // /resolve/, /raw/ and /api/resolve-cache/ requests
	TargetAPI            // other /api/ requests
)

// class is the kind of a request, for matching faults and counting.
type class int

const (
	classResolve class = iota
	classCDN
	classAPI
	classForeign
	classPage // the site's own pages ("/"): only TargetAny faults reach them
)

func (t Target) matches(c class) bool {
	switch t {
	case TargetAny:
		return c != classForeign
	case TargetCDN:
		return c == classCDN
	case TargetResolve:
		return c == classResolve
	case TargetAPI:
		return c == classAPI
	}
	return false
}

// Fault arms one kind of failure for the next N matching requests; N = 0 is
// off. N counts down as the fault fires.
type Fault struct {
	N      int64
	Target Target
}

// Faults is the hub's whole fault and shaping configuration, replaced at once
// by SetFaults.
//
// Status5xx and TooManyRequests hit any matching request before it is routed. RedirectForeign
// hits /resolve/ requests for existing files that passed the access checks.
// The others act on response bodies that carry file content (CDN blobs,
// resolve-cache and raw answers) for GET requests with a non-empty body;
// IgnoreRange and WrongContentRange also need a satisfiable Range header. At
// most one of ResetMidBody, Truncate and StallBody (in that order) fires per
// response; CorruptBytes combines with any of them.
type Faults struct {
	// Status5xx answers 503 with Retry-After: 0.
	Status5xx Fault
	// TooManyRequests answers 429 with Retry-After: 0, as the Hub's rate
	// limiter does (any caller can provoke it).
	TooManyRequests Fault
	// ResetMidBody sends the headers and CutAt bytes of the body, then
	// hijacks the connection and resets it (TCP RST). Bytes still queued in
	// the kernel may be dropped, so clients can receive fewer than CutAt.
	ResetMidBody Fault
	// Truncate sends the headers with the full Content-Length and CutAt bytes
	// of the body, then closes the connection cleanly (FIN).
	Truncate Fault
	// IgnoreRange answers a ranged request with 200 and the whole file.
	IgnoreRange Fault
	// WrongContentRange answers 206 with bytes from a different offset than
	// asked, and a Content-Range that truthfully names that offset: one byte
	// later, else one earlier; for a whole-file range, bytes 1 to the end.
	WrongContentRange Fault
	// CorruptBytes flips (XOR 0xFF) the first byte of the served body and
	// every 4096th after it, for files matching CorruptPath.
	CorruptBytes Fault
	// StallBody sends CutAt bytes, then writes nothing until the request
	// ends, the hub closes or StallFor elapses; after StallFor the rest is
	// sent. StallFor = 0 stalls until the client gives up.
	StallBody Fault
	// RedirectForeign answers /resolve/ with a 302 to ForeignURL, which
	// serves the file and records whether it received Authorization.
	RedirectForeign Fault

	// CorruptPath limits CorruptBytes to one file: "" matches every file,
	// otherwise it is matched against "{repo}/{path}" (as in BytesByPath) or
	// as a suffix after a '/' ("model.safetensors").
	CorruptPath string
	// StallFor bounds StallBody's pause; 0 = until the request ends.
	StallFor time.Duration
	// CutAt is how many body bytes ResetMidBody, Truncate and StallBody send
	// first; 0 means half the body. It is clamped below the body length.
	CutAt int64

	// Latency is added before every request is handled.
	Latency time.Duration
	// BandwidthPerConn caps every connection's writes (bytes/s, 0 = off),
	// including connections already open.
	BandwidthPerConn int64
}

// The fault kinds, named as in FaultCounts.
type faultKind int

const (
	faultStatus5xx faultKind = iota
	faultResetMidBody
	faultTruncate
	faultIgnoreRange
	faultWrongContentRange
	faultCorruptBytes
	faultStallBody
	faultRedirectForeign
	faultTooManyRequests
	faultNone
)

var faultNames = [...]string{
	faultStatus5xx:         "Status5xx",
	faultResetMidBody:      "ResetMidBody",
	faultTruncate:          "Truncate",
	faultIgnoreRange:       "IgnoreRange",
	faultWrongContentRange: "WrongContentRange",
	faultCorruptBytes:      "CorruptBytes",
	faultStallBody:         "StallBody",
	faultRedirectForeign:   "RedirectForeign",
	faultTooManyRequests:   "TooManyRequests",
}

func (k faultKind) String() string { return faultNames[k] }

// faultState holds the armed faults and how often each fired.
type faultState struct {
	mu     sync.Mutex // guards f, counts and byPath
	f      Faults
	counts map[string]int64
	byPath map[string]map[string]int64 // see FaultCountsByPath
}

func (s *faultState) field(k faultKind) *Fault {
	switch k {
	case faultStatus5xx:
		return &s.f.Status5xx
	case faultResetMidBody:
		return &s.f.ResetMidBody
	case faultTruncate:
		return &s.f.Truncate
	case faultIgnoreRange:
		return &s.f.IgnoreRange
	case faultWrongContentRange:
		return &s.f.WrongContentRange
	case faultCorruptBytes:
		return &s.f.CorruptBytes
	case faultStallBody:
		return &s.f.StallBody
	case faultRedirectForeign:
		return &s.f.RedirectForeign
	case faultTooManyRequests:
		return &s.f.TooManyRequests
	}
	panic("hubtest: unknown fault kind")
}

// take fires fault k for a request of class c about file key if it is armed
// and matches, counting it; exactly one request can take each of the N.
func (s *faultState) take(k faultKind, c class, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.field(k)
	if f.N <= 0 || !f.Target.matches(c) {
		return false
	}
	if k == faultCorruptBytes && !matchPath(s.f.CorruptPath, key) {
		return false
	}
	f.N--
	s.counts[k.String()]++
	s.notePath(k, key)
	return true
}

// cutAt is where a cutting fault stops a body of n bytes (n > 0).
func (s *faultState) cutAt(n int) int {
	s.mu.Lock()
	at := s.f.CutAt
	s.mu.Unlock()
	if at <= 0 {
		return n / 2
	}
	return int(min(at, int64(n-1)))
}

func (s *faultState) stallFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f.StallFor
}

func matchPath(pattern, key string) bool {
	return pattern == "" || key == pattern || strings.HasSuffix(key, "/"+pattern)
}

// SetFaults replaces the fault configuration, latency and bandwidth cap. It
// does not reset FaultCounts.
func (h *Hub) SetFaults(f Faults) {
	h.faults.mu.Lock()
	h.faults.f = f
	h.faults.mu.Unlock()
	h.latency.Store(int64(f.Latency))
	h.bandwidth.Store(f.BandwidthPerConn)
}

// Faults returns the current configuration; each Fault's N is what remains.
func (h *Hub) Faults() Faults {
	h.faults.mu.Lock()
	f := h.faults.f
	h.faults.mu.Unlock()
	f.Latency = time.Duration(h.latency.Load())
	f.BandwidthPerConn = h.bandwidth.Load()
	return f
}

// FaultCounts returns how often each fault fired, keyed by its Faults field
// name ("Status5xx", "ResetMidBody", …). Faults that never fired are absent.
func (h *Hub) FaultCounts() map[string]int64 {
	h.faults.mu.Lock()
	defer h.faults.mu.Unlock()
	return maps.Clone(h.faults.counts)
}
