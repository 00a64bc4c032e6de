package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// validRepo refuses the zero Repo, the only invalid one (hub.Repo is valid
// by construction), before it names a directory.
func validRepo(r hub.Repo) error {
	if r.IsZero() {
		return &hub.InvalidError{Field: "repo id", Reason: "no repository named"}
	}
	return nil
}

// WriteRef records that rev resolved to commit, as refs/<rev> holding the
// commit without a newline (refs/pr/1 is stored as refs/refs/pr/1), written
// to a temp file and renamed so readers never see a torn ref.
func (s *Store) WriteRef(repo hub.Repo, rev, commit string) error {
	if err := validRepo(repo); err != nil {
		return err
	}
	if err := hub.ValidRevision(rev); err != nil {
		return err
	}
	if !hub.IsCommit(commit) {
		return &hub.InvalidError{Field: "commit", Value: commit, Reason: "must be 40 lowercase hex digits"}
	}
	if err := writeFileAtomic(s.paths.tmp(), s.paths.ref(repo, rev), []byte(commit)); err != nil {
		return fmt.Errorf("cache: writing ref: %w", err)
	}
	s.pins.dirty.Store(true) // a pin of this branch may now mean another commit
	return nil
}

// ReadRef returns the commit recorded for rev, or ErrNotCached.
func (s *Store) ReadRef(repo hub.Repo, rev string) (string, error) {
	if err := validRepo(repo); err != nil {
		return "", err
	}
	if err := hub.ValidRevision(rev); err != nil {
		return "", err
	}
	b, err := os.ReadFile(s.paths.ref(repo, rev))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
		// ENOTDIR/EISDIR: a ref named like a prefix of another, e.g.
		// "refs/pr" next to "refs/pr/1"; neither is a cached answer.
		return "", ErrNotCached
	}
	if err != nil {
		return "", fmt.Errorf("cache: reading ref: %w", err)
	}
	commit := strings.TrimSpace(string(b))
	if !hub.IsCommit(commit) {
		return "", fmt.Errorf("%w: ref %s of %s holds no commit id", ErrNotCached, rev, repo)
	}
	return commit, nil
}

// Stat describes a cached file for offline use: from the snapshot symlink of
// a complete blob (complete = true), or from a partial's sidecar. It returns
// ErrNotCached when neither exists.
func (s *Store) Stat(repo hub.Repo, commit, path string) (f File, complete bool, err error) {
	if err := validRepo(repo); err != nil {
		return File{}, false, err
	}
	if !hub.IsCommit(commit) {
		return File{}, false, &hub.InvalidError{Field: "commit", Value: commit, Reason: "must be 40 lowercase hex digits"}
	}
	if err := hub.ValidPath(path); err != nil {
		return File{}, false, err
	}
	f = File{Repo: repo, Commit: commit, Path: path}
	if target, err := os.Readlink(s.paths.snapshot(repo, commit, path)); err == nil {
		etag := filepath.Base(target)
		if hub.ETagKind(etag) != hub.HashUnknown && filepath.Base(filepath.Dir(target)) == "blobs" {
			info, err := os.Stat(s.paths.blob(repo, etag))
			if err == nil && info.Mode().IsRegular() {
				f.ETag, f.Size = etag, info.Size()
				return f, true, nil
			}
		}
	}
	s.mu.Lock()
	it := s.links[linkKey{repo: repo, commit: commit, path: path}]
	s.mu.Unlock()
	if it != nil {
		f.ETag, f.Size = it.key.etag, it.size
		return f, it.complete.Load(), nil
	}
	return File{}, false, ErrNotCached
}

// metaPath names a meta document by the sha256 of its key, so any key is a
// safe, fixed-length file name.
func (s *Store) metaPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(s.paths.meta(), hex.EncodeToString(sum[:]))
}

// PutMeta stores a small document (API JSON) under key, atomically.
func (s *Store) PutMeta(key string, data []byte) error {
	if err := writeFileAtomic(s.paths.tmp(), s.metaPath(key), data); err != nil {
		return fmt.Errorf("cache: writing meta: %w", err)
	}
	s.meta.wrote(int64(len(data)))
	return nil
}

// GetMeta returns the document stored under key, or ErrNotCached.
func (s *Store) GetMeta(key string) ([]byte, error) {
	b, err := os.ReadFile(s.metaPath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotCached
	}
	if err != nil {
		return nil, fmt.Errorf("cache: reading meta: %w", err)
	}
	return b, nil
}
