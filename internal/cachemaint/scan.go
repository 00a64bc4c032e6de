package cachemaint

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/cache/ranges"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// orphan is a file of .hubproxy/ that nothing refers to: a partial's data
// without a valid sidecar, a sidecar without data, or a temp file.
type orphan struct {
	path  string
	bytes int64
	mtime time.Time
}

// inventory is everything List, Usage and Prune need from one walk.
type inventory struct {
	entries   []Entry
	orphans   []orphan
	snapshots map[hub.Repo]int
}

// scan walks dir's repositories and .hubproxy/partial.
func scan(dir string) (*inventory, error) {
	l := cache.NewLayout(dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cachemaint: %w", err)
	}
	inv := &inventory{snapshots: map[hub.Repo]int{}}
	for _, e := range ents {
		repo, ok := cache.ParseRepoDir(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		if snaps, err := os.ReadDir(filepath.Join(dir, e.Name(), "snapshots")); err == nil {
			inv.snapshots[repo] = len(snaps)
		}
		blobs, err := os.ReadDir(filepath.Join(dir, e.Name(), "blobs"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cachemaint: %w", err)
		}
		for _, b := range blobs {
			if !b.Type().IsRegular() || hub.ETagKind(b.Name()) == hub.HashUnknown {
				continue // huggingface_hub's *.incomplete, and the like
			}
			info, err := b.Info()
			if err != nil {
				continue // removed meanwhile
			}
			inv.entries = append(inv.entries, Entry{Repo: repo, ETag: b.Name(), Size: info.Size(),
				Bytes: info.Size(), LastAccess: lastAccess(info)})
		}
	}
	if err := inv.scanPartials(l); err != nil {
		return nil, err
	}
	slices.SortFunc(inv.entries, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Repo.String(), b.Repo.String()), cmp.Compare(a.ETag, b.ETag))
	})
	return inv, nil
}

// scanPartials reads every sidecar. Data files are claimed by valid sidecars;
// the rest of partial/ and everything in tmp/ are orphans.
func (inv *inventory) scanPartials(l cache.Layout) error {
	ents, err := os.ReadDir(l.PartialDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cachemaint: %w", err)
	}
	claimed := map[string]bool{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		name := filepath.Join(l.PartialDir(), e.Name())
		f, present, err := l.ReadSidecar(name)
		if err != nil || l.Sidecar(f.Repo, f.ETag) != name {
			continue
		}
		data, err := os.Stat(l.PartialData(f.Repo, f.ETag))
		if err != nil || !data.Mode().IsRegular() {
			continue
		}
		side, err := os.Stat(name)
		if err != nil {
			continue
		}
		present.Remove(ranges.Range{Pos: min(f.Size, data.Size()), End: 1<<63 - 1})
		claimed[name], claimed[l.PartialData(f.Repo, f.ETag)] = true, true
		last := data.ModTime()
		if side.ModTime().After(last) {
			last = side.ModTime()
		}
		inv.entries = append(inv.entries, Entry{Repo: f.Repo, ETag: f.ETag, Partial: true, Size: f.Size,
			Bytes: present.Size(), LastAccess: last})
	}
	for _, e := range ents {
		name := filepath.Join(l.PartialDir(), e.Name())
		if !claimed[name] {
			inv.addOrphan(name, e)
		}
	}
	if tmps, err := os.ReadDir(l.TmpDir()); err == nil {
		for _, e := range tmps {
			inv.addOrphan(filepath.Join(l.TmpDir(), e.Name()), e)
		}
	}
	return nil
}

func (inv *inventory) addOrphan(name string, e fs.DirEntry) {
	if info, err := e.Info(); err == nil {
		inv.orphans = append(inv.orphans, orphan{path: name, bytes: info.Size(), mtime: info.ModTime()})
	}
}

// lastAccess is the later of a file's access and modification times (the
// access time comes from the platform's stat structure: atime_*.go); on a
// filesystem mounted noatime it is simply the modification time.
func lastAccess(info fs.FileInfo) time.Time {
	t := info.ModTime()
	if at, ok := accessTime(info); ok && at.After(t) {
		t = at
	}
	return t
}
