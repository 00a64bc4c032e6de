package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// janitor is the queue of disk work that removing an item leaves behind:
// files renamed into .hubproxy/tmp/ to be deleted, and snapshot symlinks
// that point at evicted blobs. Under Store.mu a removal only renames its file
// out of the way (one O(1) call on the same file system) and queues the rest;
// a goroutine does the slow part (a walk of the repo's snapshots/ tree, the
// unlink of a large file) without the lock, in batches, so that one walk per
// repo serves every blob of that repo evicted since the previous walk. A
// crash leaves the queue in tmp/, where the next Open finishes it (wipeTmp).
type janitor struct {
	wg    sync.WaitGroup // the goroutine in Store.sweepQueued; Add only under Store.mu while !closed
	seq   atomic.Int64   // makes the names of files moved into tmp/ unique
	walks atomic.Int64   // snapshot walks done, for tests

	// Guarded by Store.mu.
	links   map[hub.Repo]map[string]bool // by repo, the etags whose snapshot links go
	files   []string                     // renamed into tmp/, to delete
	running bool                         // a goroutine is sweeping; always true while work is queued
	closed  bool                         // Close has waited for the goroutine; work is done inline
}

// janitorBatch is what one pass of the janitor removes.
type janitorBatch struct {
	links map[hub.Repo]map[string]bool
	files []string
}

func (b janitorBatch) empty() bool { return len(b.links) == 0 && len(b.files) == 0 }

// discardLocked makes name unreachable at once by renaming it into tmp/ as
// base (made unique), and queues its deletion. A file that is already gone
// is not an error. Should the rename fail (tmp/ on another file system),
// name is unlinked in place, which is slower but still correct.
func (s *Store) discardLocked(name, base string) error {
	gone := filepath.Join(s.paths.tmp(), fmt.Sprintf("%d-%s", s.jan.seq.Add(1), base))
	err := os.Rename(name, gone)
	switch {
	case err == nil:
		s.jan.files = append(s.jan.files, gone)
		s.startJanitorLocked()
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return nil
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// evictedBlob is the base name under which an evicted blob waits in tmp/
// for the janitor. It records the repo and etag, so that if the process dies
// first, the next Open still removes the blob's dangling links (wipeTmp).
func evictedBlob(r hub.Repo, etag string) string {
	return "blob-" + r.CacheDir() + "--" + etag
}

// parseEvicted inverts evictedBlob for a name in tmp/ ("<n>-blob-...").
func parseEvicted(name string) (hub.Repo, string, bool) {
	_, rest, ok := strings.Cut(name, "-blob-")
	if !ok {
		return hub.Repo{}, "", false
	}
	i := strings.LastIndex(rest, "--")
	if i < 0 {
		return hub.Repo{}, "", false
	}
	repo, ok := parseRepoDir(rest[:i])
	etag := rest[i+2:]
	return repo, etag, ok && hub.ETagKind(etag) != hub.HashUnknown
}

// wipeTmp empties tmp/ on Open: with no process using the tree, what is
// there is garbage (temp files, and files removals renamed there). Blobs
// evicted by a process that died before its janitor ran also leave dangling
// snapshot links, which are removed here with one walk per repo.
func wipeTmp(p paths) {
	ents, err := os.ReadDir(p.tmp())
	if err != nil {
		return
	}
	links := make(map[hub.Repo]map[string]bool)
	for _, e := range ents {
		if repo, etag, ok := parseEvicted(e.Name()); ok {
			if links[repo] == nil {
				links[repo] = make(map[string]bool)
			}
			links[repo][etag] = true
		}
		_ = os.RemoveAll(filepath.Join(p.tmp(), e.Name()))
	}
	for repo, etags := range links {
		_ = p.removeDanglingLinks(repo, etags)
	}
}

// unlinkLocked queues the removal of the snapshot symlinks that point at the
// blob of repo and etag, which is already gone from blobs/.
func (s *Store) unlinkLocked(repo hub.Repo, etag string) {
	if s.jan.links == nil {
		s.jan.links = make(map[hub.Repo]map[string]bool)
	}
	if s.jan.links[repo] == nil {
		s.jan.links[repo] = make(map[string]bool)
	}
	s.jan.links[repo][etag] = true
	s.startJanitorLocked()
}

// startJanitorLocked makes sure queued work gets done: by the janitor
// goroutine, started if none is running, or inline once Close has waited for
// it. Only a handle closed after the store can still queue work then (the
// data file of an empty partial), and nothing contends for the lock any more.
func (s *Store) startJanitorLocked() {
	switch {
	case s.jan.running:
	case s.jan.closed:
		s.sweep(s.takeJanitorBatchLocked())
	default:
		s.jan.running = true
		s.jan.wg.Add(1)
		go s.sweepQueued()
	}
}

// takeJanitorBatchLocked empties the queue into a batch.
func (s *Store) takeJanitorBatchLocked() janitorBatch {
	b := janitorBatch{links: s.jan.links, files: s.jan.files}
	s.jan.links, s.jan.files = nil, nil
	return b
}

// sweepQueued is the janitor goroutine: it sweeps batches until the queue is
// empty. It was started under Store.mu, usually in the middle of an eviction
// pass; taking each batch under that lock means it never sees half a pass,
// so the blobs one pass evicts share one walk per repo.
func (s *Store) sweepQueued() {
	defer s.jan.wg.Done()
	for {
		s.mu.Lock()
		b := s.takeJanitorBatchLocked()
		if b.empty() {
			s.jan.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if s.hooks.janitorBatch != nil {
			s.hooks.janitorBatch()
		}
		s.sweep(b)
	}
}

// sweep walks each of a batch's repos' snapshots/ once, then deletes its
// files. In that order, the evicted blobs in tmp/ record the walks still to
// do until they are done.
func (s *Store) sweep(b janitorBatch) {
	var errs []error
	for repo, etags := range b.links {
		s.jan.walks.Add(1)
		errs = append(errs, s.paths.removeDanglingLinks(repo, etags))
	}
	for _, name := range b.files {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("cache: removing evicted files", "err", err)
	}
}

// closeJanitor waits for the janitor goroutine to finish the queue; work
// queued afterwards is done inline. Close calls it once no fill or promotion
// is left to evict anything.
func (s *Store) closeJanitor() {
	s.mu.Lock()
	s.jan.closed = true
	s.mu.Unlock()
	s.jan.wg.Wait()
}
