package hubtest

import "maps"

// SetRequestObserver makes fn see every request the hub, the CDN and the
// foreign host finish, in the order they finish, as the request log records
// it; nil stops it. The log keeps only the last 10,000 requests, so a
// long-running caller that must account for every upstream byte (the soak
// test) needs each record as it happens. fn runs on the request's own
// goroutine after the answer was written, concurrently with other requests,
// so it must be quick and safe for concurrent use.
func (h *Hub) SetRequestObserver(fn func(RequestRecord)) {
	if fn == nil {
		h.stats.observer.Store(nil)
		return
	}
	h.stats.observer.Store(&fn)
}

// FaultCountsByPath splits FaultCounts by the file each fault hit: kind
// ("WrongContentRange", …) → "{repo}/{path}" (as in BytesByPath) → count.
// Faults that fire before a request is routed to a file (Status5xx,
// TooManyRequests) are keyed "", as are body faults on the foreign host. A
// byte-accounting caller uses it to tell which file's bytes a fault spent.
func (h *Hub) FaultCountsByPath() map[string]map[string]int64 {
	h.faults.mu.Lock()
	defer h.faults.mu.Unlock()
	out := make(map[string]map[string]int64, len(h.faults.byPath))
	for k, m := range h.faults.byPath {
		out[k] = maps.Clone(m)
	}
	return out
}

// notePath counts one firing of k against key. Callers hold s.mu.
func (s *faultState) notePath(k faultKind, key string) {
	if s.byPath == nil {
		s.byPath = make(map[string]map[string]int64)
	}
	m := s.byPath[k.String()]
	if m == nil {
		m = make(map[string]int64)
		s.byPath[k.String()] = m
	}
	m[key]++
}
