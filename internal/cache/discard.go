package cache

// Discard drops the handle's file from the cache if it is still partial,
// because its caller found that bytes served from it do not hash to the
// ETag: a whole download that finished around the cache (on a full disk the
// rest streams straight from upstream) and failed its own check. The present
// bytes cannot be trusted then, so the partial is deleted and the next Open
// refetches from scratch; readers waiting on it fail with err, as after a
// failed promotion. A file being promoted or already verified is left alone:
// its own hash check decides.
func (h *Handle) Discard(err error) {
	s, it := h.s, h.it
	s.mu.Lock()
	defer s.mu.Unlock()
	it.saveMu.Lock() // no sidecar save may resurrect the partial
	defer it.saveMu.Unlock()
	it.mu.Lock()
	if it.state != statePartial {
		it.mu.Unlock()
		return
	}
	it.state = stateFailed
	it.err = err
	it.broadcastLocked()
	it.mu.Unlock()
	s.stats.verifyFailures.Add(1)
	if !it.removed {
		s.removeLocked(it)
	}
}
