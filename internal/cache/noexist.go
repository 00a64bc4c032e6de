package cache

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// noExist is the marker huggingface_hub itself leaves when the hub answers
// EntryNotFound for a file at a commit: an empty file at
// <repo>/.no_exist/<commit>/<path>. A file's absence at a commit is as
// immutable as its bytes, so the marker never goes stale.
func (p paths) noExist(r hub.Repo, commit, path string) string {
	return filepath.Join(p.repo(r), ".no_exist", commit, filepath.FromSlash(path))
}

// WriteNoExist records that path does not exist at commit.
func (s *Store) WriteNoExist(repo hub.Repo, commit, path string) error {
	if err := validRepo(repo); err != nil {
		return err
	}
	if !hub.IsCommit(commit) {
		return &hub.InvalidError{Field: "commit", Value: commit, Reason: "must be 40 lowercase hex digits"}
	}
	if err := hub.ValidPath(path); err != nil {
		return err
	}
	name := s.paths.noExist(repo, commit, path)
	if _, err := os.Lstat(name); err == nil {
		return nil
	}
	if err := writeFileAtomic(s.paths.tmp(), name, nil); err != nil {
		return fmt.Errorf("cache: recording a missing file: %w", err)
	}
	return nil
}

// NoExist reports whether path is recorded as missing at commit.
func (s *Store) NoExist(repo hub.Repo, commit, path string) bool {
	if validRepo(repo) != nil || !hub.IsCommit(commit) || hub.ValidPath(path) != nil {
		return false
	}
	info, err := os.Lstat(s.paths.noExist(repo, commit, path))
	return err == nil && info.Mode().IsRegular()
}
