package dirhub

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// fileEntry is one file of a snapshot.
type fileEntry struct {
	path  string // path inside the repo, '/'-separated, hub.ValidPath
	rel   string // the name to open under the root
	size  int64
	mtime time.Time
	etag  string // known from an HF cache blob name; "" means hash on demand
}

// snapshot is one repository at one commit, as found on disk for one request.
type snapshot struct {
	repo   hub.Repo
	commit string
	date   time.Time
	files  []fileEntry // sorted by path
	index  map[string]int
}

func (s *snapshot) file(p string) (fileEntry, bool) {
	i, ok := s.index[p]
	if !ok {
		return fileEntry{}, false
	}
	return s.files[i], true
}

// open finds repo under the root and resolves rev to a snapshot: the HF
// cache layout first, then a plain folder.
func (h *Hub) open(repo hub.Repo, rev string) (*snapshot, *hubError) {
	if isDir(h, repo.CacheDir()) {
		return h.openHFCache(repo, rev)
	}
	if rel, ok := plainDir(repo); ok && isDir(h, rel) && (strings.Contains(repo.ID(), "/") || hasTopFile(h, rel)) {
		return h.openPlain(repo, rel, rev)
	}
	return nil, errRepoNotFound()
}

// plainDir is where a repo lives as a plain folder. Model namespaces
// "datasets" and "spaces" are the other kinds' folders, not models.
func plainDir(repo hub.Repo) (string, bool) {
	if repo.Type() == hub.Model {
		first, _, _ := strings.Cut(repo.ID(), "/")
		if first == "datasets" || first == "spaces" {
			return "", false
		}
		return filepath.FromSlash(repo.ID()), true
	}
	return filepath.FromSlash(repo.Type().Plural() + "/" + repo.ID()), true
}

func isDir(h *Hub, rel string) bool {
	info, err := h.root.Stat(rel)
	return err == nil && info.IsDir()
}

// hasTopFile tells a one-segment repo ("gpt2") from a namespace folder,
// which holds only folders.
func hasTopFile(h *Hub, rel string) bool {
	d, err := h.root.Open(rel)
	if err != nil {
		return false
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			return true
		}
	}
	return false
}

// openPlain lists a plain folder. Only "main", "HEAD" and the folder's
// current pseudo-commit resolve.
func (h *Hub) openPlain(repo hub.Repo, rel, rev string) (*snapshot, *hubError) {
	skip := func(p string, dir bool) bool {
		base := path.Base(p)
		return dir && (base == ".git" || p == ".cache")
	}
	files, err := h.walk(rel, skip, false)
	if err != nil {
		h.log.Warn("dirhub: listing repo", "repo", repo.String(), "err", err)
		return nil, errInternal()
	}
	sum := sha1.New()
	var date time.Time
	for _, f := range files {
		fmt.Fprintf(sum, "%s\x00%d\x00%d\n", f.path, f.size, f.mtime.UnixNano())
		if f.mtime.After(date) {
			date = f.mtime
		}
	}
	s := newSnapshot(repo, hex.EncodeToString(sum.Sum(nil)), date, files)
	if rev != "main" && rev != "HEAD" && rev != s.commit {
		return nil, errRevisionNotFound(rev)
	}
	return s, nil
}

// openHFCache resolves rev through refs/ and lists snapshots/<commit>.
func (h *Hub) openHFCache(repo hub.Repo, rev string) (*snapshot, *hubError) {
	dir := repo.CacheDir()
	commit, herr := h.hfCommit(dir, rev)
	if herr != nil {
		return nil, herr
	}
	base := filepath.Join(dir, "snapshots", commit)
	info, err := h.root.Stat(base)
	if err != nil {
		return nil, errRevisionNotFound(rev)
	}
	files, err := h.walk(base, nil, true)
	if err != nil {
		h.log.Warn("dirhub: listing snapshot", "repo", repo.String(), "commit", commit, "err", err)
		return nil, errInternal()
	}
	return newSnapshot(repo, commit, info.ModTime(), files), nil
}

// hfCommit maps rev to a commit that has a snapshot: a commit id directly,
// else refs/<rev>. "HEAD" means main; without refs/main (a cache filled by
// commit), main is the newest snapshot.
func (h *Hub) hfCommit(dir, rev string) (string, *hubError) {
	hasSnapshot := func(c string) bool { return hub.IsCommit(c) && isDir(h, filepath.Join(dir, "snapshots", c)) }
	if hub.IsCommit(rev) {
		if hasSnapshot(rev) {
			return rev, nil
		}
		return "", errRevisionNotFound(rev)
	}
	name := rev
	if name == "HEAD" {
		name = "main"
	}
	if b, err := h.root.ReadFile(filepath.Join(dir, "refs", filepath.FromSlash(name))); err == nil {
		if c := strings.TrimSpace(string(b)); hasSnapshot(c) {
			return c, nil
		}
	}
	if name == "main" {
		if c := h.newestSnapshot(dir); c != "" {
			return c, nil
		}
	}
	return "", errRevisionNotFound(rev)
}

func (h *Hub) newestSnapshot(dir string) string {
	d, err := h.root.Open(filepath.Join(dir, "snapshots"))
	if err != nil {
		return ""
	}
	defer d.Close()
	ents, _ := d.ReadDir(-1)
	best, bestTime := "", time.Time{}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !e.IsDir() || !hub.IsCommit(e.Name()) {
			continue
		}
		if best == "" || info.ModTime().After(bestTime) {
			best, bestTime = e.Name(), info.ModTime()
		}
	}
	return best
}

func newSnapshot(repo hub.Repo, commit string, date time.Time, files []fileEntry) *snapshot {
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	s := &snapshot{repo: repo, commit: commit, date: date, files: files, index: make(map[string]int, len(files))}
	for i, f := range files {
		s.index[f.path] = i
	}
	return s
}

// walk lists the regular files under base (a root-relative folder). skip
// prunes folders by repo path. Symlinks are followed only to regular files
// inside the root; with hfNames, a link into blobs/ gives the file its ETag.
func (h *Hub) walk(base string, skip func(p string, dir bool) bool, hfNames bool) ([]fileEntry, error) {
	var files []fileEntry
	stack := []string{""}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		d, err := h.root.Open(filepath.Join(base, filepath.FromSlash(dir)))
		if err != nil {
			if dir == "" {
				return nil, err
			}
			continue
		}
		ents, err := d.ReadDir(-1)
		d.Close()
		if err != nil && dir == "" {
			return nil, err
		}
		for _, e := range ents {
			p := path.Join(dir, e.Name())
			if hub.ValidPath(p) != nil {
				continue
			}
			rel := filepath.Join(base, filepath.FromSlash(p))
			switch t := e.Type(); {
			case t.IsDir():
				if skip == nil || !skip(p, true) {
					stack = append(stack, p)
				}
			case t.IsRegular():
				if info, err := e.Info(); err == nil {
					files = append(files, fileEntry{path: p, rel: rel, size: info.Size(), mtime: info.ModTime()})
				}
			case t&fs.ModeSymlink != 0:
				if f, ok := h.followLink(rel, p, hfNames); ok {
					files = append(files, f)
				}
			}
		}
	}
	return files, nil
}

// followLink describes the regular file a symlink leads to, if the root
// allows it (the link stays inside and is relative).
func (h *Hub) followLink(rel, p string, hfNames bool) (fileEntry, bool) {
	info, err := h.root.Stat(rel)
	if err != nil || !info.Mode().IsRegular() {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			h.log.Debug("dirhub: skipping symlink", "path", rel, "err", err)
		}
		return fileEntry{}, false
	}
	f := fileEntry{path: p, rel: rel, size: info.Size(), mtime: info.ModTime()}
	if hfNames {
		if target, err := h.root.Readlink(rel); err == nil {
			name := filepath.Base(target)
			if filepath.Base(filepath.Dir(target)) == "blobs" && hub.ETagKind(name) != hub.HashUnknown {
				f.etag = name
			}
		}
	}
	return f, true
}
