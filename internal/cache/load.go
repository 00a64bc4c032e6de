package cache

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// loaded is an item found on disk with the time it was last touched, which
// seeds the LRU order.
type loaded struct {
	it    *item
	mtime time.Time
}

// load indexes the blobs of every repo and the partials of .hubproxy/partial.
// It runs before the store is shared, so it takes no locks.
func (s *Store) load() error {
	var all []loaded
	ents, err := os.ReadDir(s.paths.root)
	if err != nil {
		return err
	}
	for _, e := range ents {
		repo, ok := parseRepoDir(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		blobs, err := os.ReadDir(filepath.Join(s.paths.root, e.Name(), "blobs"))
		if err != nil {
			continue
		}
		for _, b := range blobs {
			if !b.Type().IsRegular() || hub.ETagKind(b.Name()) == hub.HashUnknown {
				continue // e.g. huggingface_hub's *.incomplete files
			}
			info, err := b.Info()
			if err != nil {
				continue
			}
			it := newItem(itemKey{repo: repo, etag: b.Name()}, info.Size(), s.opts.BlockSize, s.paths, &s.used)
			it.state = stateComplete
			it.complete.Store(true)
			it.addBytes(info.Size())
			s.items[it.key] = it
			all = append(all, loaded{it: it, mtime: info.ModTime()})
		}
	}

	ents, err = os.ReadDir(s.paths.partial())
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if l, ok := s.loadPartial(filepath.Join(s.paths.partial(), e.Name())); ok {
			s.items[l.it.key] = l.it
			all = append(all, l)
		}
	}
	// Data files nobody claims (no sidecar, or one that was refused) are
	// removed: without a trustworthy sidecar their content is unknown.
	keep := make(map[string]bool)
	for _, l := range all {
		if !l.it.complete.Load() {
			keep[l.it.dataPath] = true
			keep[l.it.sidecarPath] = true
		}
	}
	for _, e := range ents {
		name := filepath.Join(s.paths.partial(), e.Name())
		if !keep[name] {
			_ = os.RemoveAll(name)
		}
	}

	sort.Slice(all, func(i, j int) bool { return all[i].mtime.Before(all[j].mtime) })
	for _, l := range all {
		l.it.elem = s.lru.PushFront(l.it)
	}
	return nil
}

// loadPartial reads one sidecar and rebuilds its item, keeping only present
// ranges backed by data: ranges beyond the data file's length are dropped
// (the process died before writing them). It refuses sidecars that are
// malformed, misnamed, superseded by a blob, or that claim nothing.
func (s *Store) loadPartial(name string) (loaded, bool) {
	refuse := func(reason string, err error) (loaded, bool) {
		s.log.Warn("cache: dropping partial", "sidecar", name, "reason", reason, "err", err)
		return loaded{}, false
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return refuse("unreadable", err)
	}
	var sc sidecar
	if err := json.Unmarshal(b, &sc); err != nil {
		return refuse("malformed", err)
	}
	f, err := sc.file()
	if err != nil {
		return refuse("invalid", err)
	}
	key := itemKey{repo: f.Repo, etag: f.ETag}
	it := newItem(key, f.Size, s.opts.BlockSize, s.paths, &s.used)
	if it.sidecarPath != name {
		return refuse("misnamed", nil)
	}
	if have := s.items[key]; have != nil {
		// Promoted before the sidecar could be removed.
		_ = os.Remove(it.dataPath)
		_ = os.Remove(name)
		return loaded{}, false
	}
	info, err := os.Stat(it.dataPath)
	if err != nil || !info.Mode().IsRegular() {
		_ = os.Remove(name)
		return refuse("no data file", err)
	}
	it.present = sc.Present
	it.present.Remove(ranges.Range{Pos: f.Size, End: 1<<63 - 1})
	it.addBytes(it.present.Size())
	it.alignLocked()
	it.dropBeyondLocked(info.Size())
	if it.present.Size() == 0 {
		it.addBytes(-it.bytes.Load())
		_ = os.Remove(name)
		return loaded{}, false
	}
	it.links = append([]link{{Commit: f.Commit, Path: f.Path}}, sc.Links...)
	it.links = dedupLinks(it.links)
	for _, l := range it.links {
		s.indexLinkLocked(it, linkKey{repo: f.Repo, commit: l.Commit, path: l.Path})
	}
	// The sidecar on disk may claim more than survived; the next save
	// rewrites it.
	it.savedSize = -1
	mtime := info.ModTime()
	if si, err := os.Stat(name); err == nil {
		mtime = si.ModTime()
	}
	return loaded{it: it, mtime: mtime}, true
}

// dedupLinks drops repeated links, keeping the first maxLinks.
func dedupLinks(ls []link) []link {
	var out []link
	seen := make(map[link]bool)
	for _, l := range ls {
		if !seen[l] && len(out) < maxLinks {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}
