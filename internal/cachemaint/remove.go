package cachemaint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// ErrNotCached is Remove's answer for a repo, or a revision, the cache
// directory does not hold.
var ErrNotCached = errors.New("not in the cache")

// RemoveReport is what Remove removed (or, dry, would remove).
type RemoveReport struct {
	Commits  []string // the snapshots removed
	Refs     []string // the refs that named them
	Blobs    []Entry  // blobs and partials removed
	Bytes    int64    // what they held on disk
	Kept     int      // blobs of the removed snapshots kept: another revision links them
	WholeDir bool     // the repo's folder went entirely
}

// Remove deletes a repo from the cache directory, as huggingface_hub's
// `hf cache rm` does: with rev "", the whole repo (blobs, partials,
// snapshots, refs); with a revision (a ref the cache holds, or a commit),
// that commit's snapshot, the refs naming it, and the blobs and partials
// only it uses; blobs another snapshot links to stay. Unless dry, it holds
// the directory's lock, so it fails with cache.ErrLocked while a server
// uses the cache: a server's open partials and byte accounting would go
// wrong under it.
func Remove(ctx context.Context, dir string, repo hub.Repo, rev string, dry bool) (RemoveReport, error) {
	l := cache.NewLayout(dir)
	if err := l.CheckVersion(); err != nil {
		return RemoveReport{}, err
	}
	// Before the lock, which would create a mistyped cache directory.
	root := l.Repo(repo)
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return RemoveReport{}, fmt.Errorf("%s: %w %s", repo, ErrNotCached, dir)
	}
	if !dry {
		unlock, err := l.Lock()
		if err != nil {
			return RemoveReport{}, err
		}
		defer unlock()
	}
	inv, err := scan(dir)
	if err != nil {
		return RemoveReport{}, err
	}
	snaps := filepath.Join(root, "snapshots")
	refs := readRefs(filepath.Join(root, "refs"))
	var rep RemoveReport
	var gone map[string]bool // etags to remove; nil: all of the repo's
	if rev != "" {
		commit, ok := rev, hub.IsCommit(rev)
		if !ok {
			commit, ok = refs[rev]
		}
		if _, err := os.Stat(filepath.Join(snaps, commit)); !ok || !hub.IsCommit(commit) || err != nil {
			return RemoveReport{}, fmt.Errorf("%s@%s: %w (cached revisions: %s)", repo, rev, ErrNotCached, cachedRevisions(snaps, refs))
		}
		rep.Commits = []string{commit}
		mine := snapshotLinks(filepath.Join(snaps, commit))
		others := map[string]bool{}
		if ents, err := os.ReadDir(snaps); err == nil {
			for _, e := range ents {
				if e.Name() != commit {
					for etag := range snapshotLinks(filepath.Join(snaps, e.Name())) {
						others[etag] = true
					}
				}
			}
		}
		gone = map[string]bool{}
		for etag := range mine {
			if others[etag] {
				rep.Kept++
			} else {
				gone[etag] = true
			}
		}
		for name, c := range refs {
			if c == commit {
				rep.Refs = append(rep.Refs, name)
			}
		}
	} else {
		if ents, err := os.ReadDir(snaps); err == nil {
			for _, e := range ents {
				rep.Commits = append(rep.Commits, e.Name())
			}
		}
		for name := range refs {
			rep.Refs = append(rep.Refs, name)
		}
		rep.WholeDir = true
	}
	slices.Sort(rep.Refs)
	for _, e := range inv.entries {
		if e.Repo != repo {
			continue
		}
		// A partial is not linked from any snapshot yet: it goes with
		// the repo, and with a revision only if that revision linked its
		// etag before (a blob being refetched).
		if gone == nil || gone[e.ETag] {
			rep.Blobs = append(rep.Blobs, e)
			rep.Bytes += e.Bytes
		}
	}
	if dry || ctx.Err() != nil {
		return rep, ctx.Err()
	}
	var errs []error
	for _, e := range rep.Blobs {
		errs = append(errs, removeEntry(l, e))
	}
	if rep.WholeDir {
		errs = append(errs, os.RemoveAll(root))
		return rep, errors.Join(errs...)
	}
	for _, name := range rep.Refs {
		errs = append(errs, ignoreNotExist(os.Remove(filepath.Join(root, "refs", filepath.FromSlash(name)))))
	}
	errs = append(errs, os.RemoveAll(filepath.Join(snaps, rep.Commits[0])))
	errs = append(errs, tidyRepo(l, repo))
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		rep.WholeDir = true
	}
	return rep, errors.Join(errs...)
}

func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// readRefs maps each ref under refsDir ("main", "refs/pr/1") to its commit.
func readRefs(refsDir string) map[string]string {
	refs := map[string]string{}
	filepath.WalkDir(refsDir, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return nil
		}
		if rel, err := filepath.Rel(refsDir, name); err == nil {
			refs[filepath.ToSlash(rel)] = strings.TrimSpace(string(b))
		}
		return nil
	})
	return refs
}

// snapshotLinks returns the etags a snapshot's symlinks point at.
func snapshotLinks(snapshot string) map[string]bool {
	etags := map[string]bool{}
	filepath.WalkDir(snapshot, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if target, err := os.Readlink(name); err == nil {
			etags[filepath.Base(target)] = true
		}
		return nil
	})
	return etags
}

// cachedRevisions lists a repo's refs and commits, for an error message.
func cachedRevisions(snaps string, refs map[string]string) string {
	var out []string
	named := map[string]bool{}
	for name, c := range refs {
		out = append(out, name+" ("+c[:min(12, len(c))]+")")
		named[c] = true
	}
	if ents, err := os.ReadDir(snaps); err == nil {
		for _, e := range ents {
			if !named[e.Name()] {
				out = append(out, e.Name())
			}
		}
	}
	if len(out) == 0 {
		return "none"
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
