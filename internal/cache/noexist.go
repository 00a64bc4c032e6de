package cache

import (
	"container/list"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// noExist is the marker huggingface_hub itself leaves when the hub answers
// EntryNotFound for a file at a commit: an empty file at
// <repo>/.no_exist/<commit>/<path>. A file's absence at a commit is as
// immutable as its bytes, so the marker never goes stale.
func (p paths) noExist(r hub.Repo, commit, path string) string {
	return filepath.Join(p.noExistDir(r, commit), filepath.FromSlash(path))
}

// noExistDir holds every marker of one repo's commit.
func (p paths) noExistDir(r hub.Repo, commit string) string {
	return filepath.Join(p.repo(r), ".no_exist", commit)
}

// The default bounds on .no_exist markers, in files and directories. A
// marker costs no bytes, so the byte budget never sees it, but any caller can
// make one per made-up path: unbounded, they would fill the filesystem's
// inodes. A model's loader probes a handful of optional files per commit;
// these leave room for far more than that while keeping the tree small.
const (
	DefaultMaxNoExist          = 100_000
	DefaultMaxNoExistPerCommit = 10_000
)

// markers bounds the .no_exist markers. They are counted per repo and
// commit (a group: one .no_exist/<commit> directory) and in all, in
// entries: a marker's file plus one directory per segment of its path (an
// upper bound: directories shared with other markers are counted again). A
// commit at its bound records no more markers, so made-up paths at one
// commit cannot push out the real ones recorded first; past the overall
// bound, the groups written to least recently are removed, whole, so the
// newest markers always answer. Counts are taken from the disk at the first
// write, so markers of earlier runs, and of huggingface_hub, count too.
//
// mu serialises writers only: NoExist reads the disk without it, and a
// marker removed under a reader merely sends it upstream.
type markers struct {
	mu     sync.Mutex
	loaded bool
	groups map[markerKey]*markerGroup
	order  *list.List // of *markerGroup, most recently written at the front
	total  int        // entries of every group
	// warnedCommit and warnedTotal make each bound's warning once per run.
	warnedCommit, warnedTotal bool
}

type markerKey struct {
	repo   hub.Repo
	commit string
}

type markerGroup struct {
	key     markerKey
	entries int
	elem    *list.Element
}

// markerCost is the entries one marker can add: its file, and a directory
// per segment before it.
func markerCost(path string) int { return strings.Count(path, "/") + 1 }

// noExistBounds are the options' bounds, or the defaults.
func (s *Store) noExistBounds() (total, perCommit int) {
	total, perCommit = s.opts.MaxNoExist, s.opts.MaxNoExistPerCommit
	if total <= 0 {
		total = DefaultMaxNoExist
	}
	if perCommit <= 0 {
		perCommit = DefaultMaxNoExistPerCommit
	}
	return total, perCommit
}

// WriteNoExist records that path does not exist at commit, unless the
// markers' bounds say not to: that is not an error (the marker only saves
// asking upstream again), and is logged once.
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
	gone, err := s.writeMarker(markerKey{repo: repo, commit: commit}, name, markerCost(path))
	// Removing whole groups walks them: done here, without the lock, by
	// the writer whose marker needed the room.
	for _, dir := range gone {
		_ = os.RemoveAll(dir)
	}
	if err != nil {
		return fmt.Errorf("cache: recording a missing file: %w", err)
	}
	return nil
}

// writeMarker writes one marker within the bounds, and returns the
// directories of the groups it evicted, to delete.
func (s *Store) writeMarker(key markerKey, name string, cost int) ([]string, error) {
	m := &s.marks
	m.mu.Lock()
	defer m.mu.Unlock()
	total, perCommit := s.noExistBounds()
	var gone []string
	if !m.loaded {
		m.load(s.paths)
		gone = s.trimMarkersLocked(total, nil)
	}
	if _, err := os.Lstat(name); err == nil {
		return gone, nil // another writer's, while this one waited
	}
	g := m.groups[key]
	if g == nil {
		g = &markerGroup{key: key}
		g.elem = m.order.PushFront(g)
		m.groups[key] = g
	}
	if g.entries+cost > perCommit {
		if _, err := os.Lstat(s.paths.noExistDir(key.repo, key.commit)); errors.Is(err, fs.ErrNotExist) {
			// Removed behind our back (huggingface-cli delete-cache).
			m.total -= g.entries
			g.entries = 0
		} else {
			if !m.warnedCommit {
				m.warnedCommit = true
				s.log.Warn("cache: a commit has too many .no_exist markers; recording no more for it",
					"repo", key.repo.String(), "commit", key.commit, "max_entries", perCommit)
			}
			return gone, nil
		}
	}
	if m.total+cost > total {
		gone = s.trimMarkersLocked(total-cost, g)
		if m.total+cost > total {
			return gone, nil // only this group is left, and it is full
		}
	}
	if err := writeFileAtomic(s.paths.tmp(), name, nil); err != nil {
		return gone, err
	}
	g.entries += cost
	m.total += cost
	m.order.MoveToFront(g.elem)
	return gone, nil
}

// trimMarkersLocked removes the least recently written groups, other than
// keep, until at most limit entries remain. Each group's directory is
// renamed into tmp/ at once (so no writer can add to it, and a crash leaves
// it to the next Open's wipeTmp); the returned names are left to delete.
func (s *Store) trimMarkersLocked(limit int, keep *markerGroup) []string {
	m := &s.marks
	var gone []string
	for e := m.order.Back(); e != nil && m.total > limit; {
		g := e.Value.(*markerGroup)
		e = e.Prev()
		if g == keep {
			continue
		}
		dir := s.paths.noExistDir(g.key.repo, g.key.commit)
		to := filepath.Join(s.paths.tmp(), fmt.Sprintf("%d-noexist", s.jan.seq.Add(1)))
		switch err := os.Rename(dir, to); {
		case err == nil:
			gone = append(gone, to)
		case !errors.Is(err, fs.ErrNotExist):
			gone = append(gone, dir) // tmp/ elsewhere: delete in place
		}
		m.order.Remove(g.elem)
		delete(m.groups, g.key)
		m.total -= g.entries
		if !m.warnedTotal {
			m.warnedTotal = true
			max, _ := s.noExistBounds()
			s.log.Warn("cache: too many .no_exist markers; removing those of the commits written to least recently",
				"max_entries", max)
		}
	}
	return gone
}

// load counts the markers on disk, group by group, ordered by when each
// group's directory last changed.
func (m *markers) load(p paths) {
	m.loaded = true
	m.groups = make(map[markerKey]*markerGroup)
	m.order = list.New()
	type found struct {
		g     *markerGroup
		mtime time.Time
	}
	var all []found
	repos, _ := os.ReadDir(p.root)
	for _, e := range repos {
		repo, ok := parseRepoDir(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		commits, _ := os.ReadDir(filepath.Join(p.root, e.Name(), ".no_exist"))
		for _, c := range commits {
			if !c.IsDir() || !hub.IsCommit(c.Name()) {
				continue
			}
			info, err := c.Info()
			if err != nil {
				continue
			}
			g := &markerGroup{key: markerKey{repo: repo, commit: c.Name()}}
			root := p.noExistDir(repo, c.Name())
			filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
				if err == nil && path != root {
					g.entries++
				}
				return nil
			})
			m.groups[g.key] = g
			m.total += g.entries
			all = append(all, found{g, info.ModTime()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mtime.Before(all[j].mtime) })
	for _, f := range all {
		f.g.elem = m.order.PushFront(f.g)
	}
}

// NoExist reports whether path is recorded as missing at commit.
func (s *Store) NoExist(repo hub.Repo, commit, path string) bool {
	if validRepo(repo) != nil || !hub.IsCommit(commit) || hub.ValidPath(path) != nil {
		return false
	}
	info, err := os.Lstat(s.paths.noExist(repo, commit, path))
	return err == nil && info.Mode().IsRegular()
}
