package cache

import (
	"errors"
	"io/fs"
	"os"
)

// detachLocked removes it from the index and the budget.
func (s *Store) detachLocked(it *item) {
	s.closeIdleLocked(it)
	if s.items[it.key] == it {
		delete(s.items, it.key)
	}
	if it.elem != nil {
		s.lru.Remove(it.elem)
		it.elem = nil
	}
	s.unindexLinksLocked(it)
	it.removed = true
	it.addBytes(-it.bytes.Load())
}

// removeLocked detaches it and makes its files unreachable: a partial's
// sidecar is unlinked, and its data file, or the blob, is renamed into tmp/.
// The janitor deletes the renamed file later, and for a blob the snapshot
// symlinks that point at it, since the caller holds Store.mu and that takes
// a walk of the repo's snapshots. Open handles (only possible after a failed
// verification) keep reading their renamed file.
func (s *Store) removeLocked(it *item) {
	s.detachLocked(it)
	var errs []error
	if it.complete.Load() {
		errs = append(errs, s.discardLocked(it.blobPath, evictedBlob(it.key.repo, it.key.etag)))
		s.unlinkLocked(it.key.repo, it.key.etag)
	} else {
		if err := os.Remove(it.sidecarPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		errs = append(errs, s.discardLocked(it.dataPath, "partial"))
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("cache: removing item", "repo", it.key.repo.String(), "etag", it.key.etag, "err", err)
	}
}
