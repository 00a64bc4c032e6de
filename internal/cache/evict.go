package cache

// evictFor makes room for the bytes fills have reserved. It removes the least
// recently opened items that nobody holds (no handle, fill or promotion) and
// no pin covers (pins.go), blobs and partials alike, until the store fits MaxBytes and the filesystem
// keeps MinFreeBytes free. If that is not possible the fill goes ahead anyway:
// the cache serves over budget rather than deadlocking, and says so in the
// log (once per episode).
func (s *Store) evictFor() {
	if s.opts.MaxBytes == 0 && s.opts.MinFreeBytes == 0 {
		return
	}
	// Cheap check without the lock; most fills need no eviction.
	if s.opts.MinFreeBytes == 0 && s.needLocked(-1, 0) <= 0 {
		s.overBudget.Store(false)
		return
	}

	pins := s.currentPins() // built off the lock: it reads the disk
	s.mu.Lock()
	defer s.mu.Unlock()
	// Measured under the lock, so concurrent fills see each other's
	// evictions and do not evict twice for the same bytes.
	free := int64(-1)
	if s.opts.MinFreeBytes > 0 {
		if f, err := freeBytes(s.paths.root); err == nil {
			free = f
		}
	}
	var freed int64
	for e := s.lru.Back(); e != nil && s.needLocked(free, freed) > 0; {
		prev := e.Prev()
		it := e.Value.(*item)
		if it.refs.Load() == 0 && !s.pinnedLocked(pins, it) {
			freed += it.bytes.Load()
			s.removeLocked(it)
			s.stats.evictions.Add(1)
			s.log.Debug("cache: evicted", "repo", it.key.repo.String(), "etag", it.key.etag)
		}
		e = prev
	}
	if need := s.needLocked(free, freed); need <= 0 {
		s.overBudget.Store(false)
	} else if !s.overBudget.Swap(true) {
		s.log.Warn("cache: over budget and everything left is in use or pinned; serving anyway",
			"need", need, "used", s.used.Load(), "max", s.opts.MaxBytes)
	}
}

// needLocked is how many bytes must be evicted: the excess over MaxBytes and
// the shortfall below MinFreeBytes (when free >= 0, with freed bytes already
// released since free was measured), counting reserved bytes as used.
// Callers hold s.mu, except the lock-free pre-check with free < 0.
func (s *Store) needLocked(free, freed int64) int64 {
	reserved := s.reserved.Load()
	var need int64
	if s.opts.MaxBytes > 0 {
		need = s.used.Load() + reserved - s.opts.MaxBytes
	}
	if free >= 0 {
		need = max(need, s.opts.MinFreeBytes+reserved-(free+freed))
	}
	return need
}

// pinnedLocked reports whether a pin covers it. The caller holds s.mu.
func (s *Store) pinnedLocked(pins *pinIndex, it *item) bool {
	if pins == nil {
		return false
	}
	it.mu.Lock()
	links := it.links
	it.mu.Unlock()
	return pins.pinned(it.key.repo, it.key.etag, links)
}
