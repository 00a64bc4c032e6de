package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// What the offline maintenance of a cache directory (internal/cachemaint:
// hubproxy cache ls|du|verify|prune|pin) needs of the layout this package
// owns. They are thin names for the helpers the Store itself uses, so the
// layout is written down once, here; the Store never calls them.

// Layout names the files of the cache directory at one root (see the
// package documentation) and does the few things a tool working on the
// tree without a Store needs: check its version, lock it, read a sidecar,
// remove dangling snapshot links.
type Layout struct{ p paths }

// NewLayout is the layout of the cache directory dir.
func NewLayout(dir string) Layout { return Layout{paths{root: dir}} }

// Repo is a repository's folder (hub.Repo.CacheDir under the root).
func (l Layout) Repo(r hub.Repo) string { return l.p.repo(r) }

// Blob is the complete, verified content of etag.
func (l Layout) Blob(r hub.Repo, etag string) string { return l.p.blob(r, etag) }

// Snapshot is the symlink snapshots/<commit>/<path>.
func (l Layout) Snapshot(r hub.Repo, commit, path string) string {
	return l.p.snapshot(r, commit, path)
}

// PartialDir holds the partials' data files and sidecars.
func (l Layout) PartialDir() string { return l.p.partial() }

// TmpDir holds temp files, renamed into place or garbage.
func (l Layout) TmpDir() string { return l.p.tmp() }

// VersionFile records the layout version.
func (l Layout) VersionFile() string { return l.p.version() }

// PartialData is the sparse data file of a partial.
func (l Layout) PartialData(r hub.Repo, etag string) string { return l.p.partialData(r, etag) }

// Sidecar is the JSON describing a partial's data file.
func (l Layout) Sidecar(r hub.Repo, etag string) string { return l.p.sidecar(r, etag) }

// CheckVersion refuses a tree that a hubproxy with another layout version
// wrote, before anything modifies it. A tree without .hubproxy/version (a
// plain HF_HUB_CACHE) is fine.
func (l Layout) CheckVersion() error { return checkLayout(l.p.root) }

// Lock takes the directory's lock, as a Store holds it for its lifetime; it
// fails with ErrLocked while a Store (or another tool) holds it.
func (l Layout) Lock() (unlock func() error, err error) {
	lock, err := lockDir(l.p.root)
	if err != nil {
		return nil, err
	}
	return lock.unlock, nil
}

// RemoveDanglingLinks deletes, in one walk of r's snapshots/, the symlinks
// to blobs named in etags whose blob no longer exists.
func (l Layout) RemoveDanglingLinks(r hub.Repo, etags map[string]bool) error {
	return l.p.removeDanglingLinks(r, etags)
}

// ReadSidecar reads and validates a partial's sidecar, returning the file it
// describes and the ranges it claims present (not yet clipped to the data
// file). It does not check that name is where that file's sidecar belongs.
func (l Layout) ReadSidecar(name string) (File, ranges.Set, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return File{}, ranges.Set{}, err
	}
	var sc sidecar
	if err := json.Unmarshal(b, &sc); err != nil {
		return File{}, ranges.Set{}, err
	}
	f, err := sc.file()
	if err != nil {
		return File{}, ranges.Set{}, err
	}
	return f, sc.Present, nil
}

// ParseRepoDir inverts hub.Repo.CacheDir ("models--ns--name"); it reports
// false for any other name.
func ParseRepoDir(name string) (hub.Repo, bool) { return parseRepoDir(name) }

// PinCover says which files of a cache directory a set of pins covers.
type PinCover struct{ x *pinIndex }

// ResolvePins resolves pins against the cache directory as it is now:
// revisions through refs/, commits to the blobs their snapshots link to. A
// revision the cache holds no ref for covers nothing yet.
func ResolvePins(dir string, pins []Pin) PinCover { return PinCover{indexPins(dir, pins)} }

// Covers reports whether the file etag of repo is pinned.
func (c PinCover) Covers(repo hub.Repo, etag string) bool { return c.x.pinned(repo, etag, nil) }

// checkLayout is Layout.CheckVersion; the Store's own check (checkVersion)
// also stamps a fresh tree, which an offline tool must not do.
func checkLayout(dir string) error {
	b, err := os.ReadFile(paths{root: dir}.version())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if v := strings.TrimSpace(string(b)); v != strconv.Itoa(layoutVersion) {
		return fmt.Errorf("cache: %s has layout version %q, this build uses %d", dir, v, layoutVersion)
	}
	return nil
}
