package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// hashFile hashes the first size bytes of f as an etag of kind.
func hashFile(ctx context.Context, f io.ReaderAt, size int64, kind hub.HashKind) (string, error) {
	return hub.HashContent(ctx, io.NewSectionReader(f, 0, size), kind, size)
}

// startPromote runs promotion on its own goroutine, so fills (of this and
// other files) never wait for hashing. The caller moved the item to
// statePromoting, which makes promotion single-flight.
func (s *Store) startPromote(it *item) {
	if !s.goTracked(it, func() { s.promote(it) }) {
		it.mu.Lock()
		it.state = statePartial // retried on the next Open
		it.broadcastLocked()
		it.mu.Unlock()
	}
}

// promote verifies a fully present partial and moves it into blobs/.
func (s *Store) promote(it *item) {
	it.mu.Lock()
	file := it.file
	it.mu.Unlock()
	// Usually the running hash has followed the fills and only the tail is
	// left to hash; after a restart it starts from the beginning.
	got, err := s.advanceHash(it, true), error(nil)
	if got == "" {
		got, err = hashFile(s.ctx, file, it.size, hub.ETagKind(it.key.etag))
	}
	if err != nil && s.isClosed() {
		it.mu.Lock()
		it.state = statePartial
		it.broadcastLocked()
		it.mu.Unlock()
		return
	}
	if err == nil && got != it.key.etag {
		s.stats.verifyFailures.Add(1)
		err = &VerifyError{ETag: it.key.etag, Got: got}
		if s.opts.OnVerifyFailed != nil {
			s.opts.OnVerifyFailed(it.key.repo, it.key.etag)
		}
	}
	if err == nil {
		err = s.commitBlob(it, file)
	}
	if err != nil {
		s.log.Error("cache: promotion failed; partial deleted", "repo", it.key.repo.String(),
			"etag", it.key.etag, "err", err)
		s.failPromotion(it, err)
		return
	}

	it.mu.Lock()
	links := slices.Clone(it.links)
	it.mu.Unlock()
	for _, l := range links {
		if err := s.paths.ensureSymlink(it.key.repo, l.Commit, l.Path, it.key.etag); err != nil {
			s.log.Warn("cache: snapshot symlink", "repo", it.key.repo.String(), "path", l.Path, "err", err)
		}
	}

	s.stats.promotions.Add(1)
	s.pins.dirty.Store(true) // new snapshot links: a pinned commit may cover it
	s.mu.Lock()
	it.saveMu.Lock()
	it.mu.Lock()
	it.state = stateComplete
	it.complete.Store(true)
	it.pending = ranges.Set{}
	clear(it.fails)
	it.broadcastLocked()
	it.mu.Unlock()
	if err := os.Remove(it.sidecarPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("cache: removing sidecar", "path", it.sidecarPath, "err", err)
	}
	it.saveMu.Unlock()
	s.unindexLinksLocked(it) // Stat now finds the snapshot symlinks
	s.mu.Unlock()
}

// commitBlob makes the verified data durable and renames it into blobs/.
// A crash at any point leaves either the partial or a complete, verified blob.
func (s *Store) commitBlob(it *item, file *os.File) error {
	if err := file.Sync(); err != nil {
		return err
	}
	dir := filepath.Dir(it.blobPath)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	if err := os.Rename(it.dataPath, it.blobPath); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		s.log.Warn("cache: fsync blobs dir", "dir", dir, "err", err)
	}
	return nil
}

// failPromotion marks it failed (waking readers with err) and deletes the
// partial, so the next Open starts from scratch.
func (s *Store) failPromotion(it *item, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it.saveMu.Lock() // no sidecar save may resurrect the partial
	defer it.saveMu.Unlock()
	it.mu.Lock()
	it.state = stateFailed
	it.err = err
	it.broadcastLocked()
	it.mu.Unlock()
	if !it.removed {
		s.removeLocked(it)
	}
}

// ensureEmptyBlob creates the blob of a zero-byte file, after checking that
// its etag is the hash of empty content.
func (s *Store) ensureEmptyBlob(f File) error {
	got, _ := hashFile(context.Background(), emptyReader{}, 0, hub.ETagKind(f.ETag))
	if got != f.ETag {
		s.stats.verifyFailures.Add(1)
		return &VerifyError{ETag: f.ETag, Got: got}
	}
	name := s.paths.blob(f.Repo, f.ETag)
	if _, err := os.Stat(name); err == nil {
		return nil
	}
	if err := writeFileAtomic(s.paths.tmp(), name, nil); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

type emptyReader struct{}

func (emptyReader) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }
