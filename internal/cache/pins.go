package cache

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// A Pin keeps a model's files in the cache: eviction and prune pass over
// them, and `cache store prune` over their chunks in the shared store.
//
// A pin without a revision covers every file of the repo the cache holds; one
// with a revision covers the files of that commit (a branch or tag is read
// from the cache's refs/, so a pin of "main" follows the branch as the cache
// learns of new commits, and the files of the commit it moved from are no
// longer pinned).
type Pin struct {
	Repo hub.Repo
	Rev  string // "" for the whole repo
}

// ParsePin parses "[datasets/|spaces/]namespace/name[@revision]", the form
// of the hub's URLs.
func ParsePin(s string) (Pin, error) {
	spec, rev, hasRev := strings.Cut(strings.TrimSpace(s), "@")
	typ := hub.Model
	if plural, rest, ok := strings.Cut(spec, "/"); ok && strings.Contains(rest, "/") {
		t, known := hub.ParseRepoType(plural)
		if !known {
			return Pin{}, fmt.Errorf("pin %q: %q is not a repo type (models, datasets or spaces)", s, plural)
		}
		typ, spec = t, rest
	}
	repo, err := hub.ParseRepo(typ, spec)
	if err != nil {
		return Pin{}, fmt.Errorf("pin %q: %w", s, err)
	}
	if hasRev {
		if err := hub.ValidRevision(rev); err != nil {
			return Pin{}, fmt.Errorf("pin %q: %w", s, err)
		}
	}
	return Pin{Repo: repo, Rev: rev}, nil
}

// String is the form ParsePin reads.
func (p Pin) String() string {
	s := p.Repo.Type().URLPrefix() + p.Repo.ID()
	if p.Rev != "" {
		s += "@" + p.Rev
	}
	return s
}

// pinsPath is the file `hubproxy cache pin` keeps its pins in, one per line.
func pinsPath(dir string) string { return filepath.Join(paths{root: dir}.state(), "pins") }

// ReadPins returns the pins recorded in the cache directory (not those of
// the configuration). A missing file is no pins.
func ReadPins(dir string) ([]Pin, error) {
	f, err := os.Open(pinsPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Pin
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p, err := ParsePin(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", pinsPath(dir), n, err)
		}
		out = append(out, p)
	}
	return out, sc.Err()
}

// WritePins replaces the pins recorded in the cache directory (the file
// ReadPins reads; internal/cachemaint edits it). A running server picks
// them up at its next eviction.
func WritePins(dir string, pins []Pin) error {
	if err := checkLayout(dir); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# Pinned repos (hubproxy cache pin): never evicted or pruned.\n")
	for _, p := range pins {
		b.WriteString(p.String() + "\n")
	}
	// A cache directory only huggingface_hub has written has no temp
	// directory of ours yet: pinning it must not need a server run first.
	p := paths{root: dir}
	if err := os.MkdirAll(p.tmp(), dirMode); err != nil {
		return err
	}
	return writeFileAtomic(p.tmp(), pinsPath(dir), []byte(b.String()))
}

// pinIndex says which files pins cover, as the cache directory shows them.
type pinIndex struct {
	repos   map[hub.Repo]bool            // pinned whole
	commits map[hub.Repo]map[string]bool // pinned commits of repos pinned at a revision
	etags   map[hub.Repo]map[string]bool // blobs those commits' snapshots link to
}

// pinned reports whether the file etag of repo, opened under links, is
// pinned.
func (x *pinIndex) pinned(repo hub.Repo, etag string, links []link) bool {
	if x == nil {
		return false
	}
	if x.repos[repo] || x.etags[repo][etag] {
		return true
	}
	for _, l := range links {
		if x.commits[repo][l.Commit] {
			return true
		}
	}
	return false
}

// indexPins resolves pins against the cache directory: revisions through
// refs/, and commits to the blobs their snapshots link to. A revision the
// cache holds no ref for pins nothing yet.
func indexPins(dir string, pins []Pin) *pinIndex {
	x := &pinIndex{repos: map[hub.Repo]bool{}, commits: map[hub.Repo]map[string]bool{}, etags: map[hub.Repo]map[string]bool{}}
	p := paths{root: dir}
	for _, pin := range pins {
		if pin.Rev == "" {
			x.repos[pin.Repo] = true
			continue
		}
		commit := pin.Rev
		if !hub.IsCommit(commit) {
			b, err := os.ReadFile(p.ref(pin.Repo, pin.Rev))
			if err != nil || !hub.IsCommit(strings.TrimSpace(string(b))) {
				continue
			}
			commit = strings.TrimSpace(string(b))
		}
		if x.commits[pin.Repo] == nil {
			x.commits[pin.Repo] = map[string]bool{}
			x.etags[pin.Repo] = map[string]bool{}
		}
		x.commits[pin.Repo][commit] = true
		root := filepath.Join(p.repo(pin.Repo), "snapshots", commit)
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			if target, err := os.Readlink(path); err == nil {
				x.etags[pin.Repo][filepath.Base(target)] = true
			}
			return nil
		})
	}
	return x
}

// pinState is a Store's view of its pins: Options.Pins plus the cache
// directory's pins file, resolved into an index that eviction reads. It is
// rebuilt off the store's lock, when the pins file changed, when refs or
// snapshots changed (dirty) at most once a second, and every 30 s anyway.
type pinState struct {
	dirty atomic.Bool // a ref was written or a blob promoted since the last build

	mu      sync.Mutex // serialises rebuilds; guards the fields below
	idx     *pinIndex
	builtAt time.Time
	fileMod time.Time
}

// currentPins returns the pin index, rebuilding it if it may be stale.
func (s *Store) currentPins() *pinIndex {
	ps := &s.pins
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var mod time.Time
	if info, err := os.Stat(pinsPath(s.paths.root)); err == nil {
		mod = info.ModTime()
	}
	age := s.now().Sub(ps.builtAt)
	if !ps.builtAt.IsZero() && mod.Equal(ps.fileMod) && age < 30*time.Second && (age < time.Second || !ps.dirty.Load()) {
		return ps.idx
	}
	ps.dirty.Store(false)
	pins := slices.Clone(s.opts.Pins)
	filePins, err := ReadPins(s.paths.root)
	if err != nil {
		s.log.Warn("cache: reading pins; keeping the configured ones", "err", err)
	}
	pins = append(pins, filePins...)
	if len(pins) == 0 {
		ps.idx = nil
	} else {
		ps.idx = indexPins(s.paths.root, pins)
	}
	ps.builtAt, ps.fileMod = s.now(), mod
	return ps.idx
}
