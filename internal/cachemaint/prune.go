package cachemaint

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// removeEntry deletes a blob, or a partial's data file and sidecar. The
// snapshot links of removed blobs are removed afterwards, one walk per repo
// (see Prune).
func removeEntry(l cache.Layout, e Entry) error {
	rm := func(name string) error {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if e.Partial {
		return errors.Join(rm(l.PartialData(e.Repo, e.ETag)), rm(l.Sidecar(e.Repo, e.ETag)))
	}
	return rm(l.Blob(e.Repo, e.ETag))
}

// tidyRepo removes the empty folders left under a repo's snapshots/, and the
// whole repo folder (refs included) once it holds no blob and no snapshot
// file, as huggingface_hub's delete-cache leaves nothing behind either.
func tidyRepo(l cache.Layout, r hub.Repo) error {
	snaps := filepath.Join(l.Repo(r), "snapshots")
	var dirs []string
	files := 0
	filepath.WalkDir(snaps, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			dirs = append(dirs, name)
		} else {
			files++
		}
		return nil
	})
	// Deepest first: a folder is empty only once its children are gone.
	slices.SortFunc(dirs, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, d := range dirs {
		if d != snaps {
			_ = os.Remove(d) // fails, harmlessly, unless empty
		}
	}
	// Anything left in blobs/ (even a huggingface_hub *.incomplete
	// download in progress) keeps the repo.
	blobs, err := os.ReadDir(filepath.Join(l.Repo(r), "blobs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if files == 0 && len(blobs) == 0 {
		return os.RemoveAll(l.Repo(r))
	}
	return nil
}

// PruneOptions configure Prune. At least one of MaxBytes and OlderThan
// should be set; with neither, only orphans are removed.
type PruneOptions struct {
	// MaxBytes removes the least recently used entries until blobs and
	// partials together hold at most this many bytes; 0 = no size target.
	MaxBytes int64
	// OlderThan removes entries not used for this long; 0 = no age target.
	OlderThan time.Duration
	// StaleAfter protects recent activity: partials written and orphaned
	// files modified within it are kept (a live server may be using them).
	// Default 1h.
	StaleAfter time.Duration
	// DryRun reports what would be removed, and removes nothing.
	DryRun bool
	// Pins are kept, besides the pins recorded in the directory.
	Pins []cache.Pin
	// Now is the reference time; zero means time.Now().
	Now time.Time
}

// Pruned is one removed entry and why.
type Pruned struct {
	Entry
	Reason string // "older-than", "size" or "orphan"
}

// PruneReport is what Prune removed.
type PruneReport struct {
	Before, After int64 // bytes held by blobs and partials
	Freed         int64 // bytes removed, orphans included
	Removed       []Pruned
	Pinned        int64 // bytes kept because a pin covers them
	Over          bool  // After is still above MaxBytes: what is left is protected by StaleAfter or pins
}

// Prune removes orphaned files, then entries unused for OlderThan, then the
// least recently used entries until the total is at most MaxBytes. Entries
// pins cover are never removed. A blob
// goes with the snapshot links that point at it, and a repo left with
// nothing goes entirely.
func Prune(ctx context.Context, dir string, opts PruneOptions) (PruneReport, error) {
	if opts.MaxBytes < 0 || opts.OlderThan < 0 || opts.StaleAfter < 0 {
		return PruneReport{}, errors.New("cachemaint: negative prune option")
	}
	l := cache.NewLayout(dir)
	if err := l.CheckVersion(); err != nil {
		return PruneReport{}, err
	}
	if !opts.DryRun {
		unlock, err := l.Lock()
		if err != nil {
			return PruneReport{}, err
		}
		defer unlock()
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	stale := cmp.Or(opts.StaleAfter, time.Hour)
	inv, err := scan(dir)
	if err != nil {
		return PruneReport{}, err
	}
	var rep PruneReport
	for _, e := range inv.entries {
		rep.Before += e.Bytes
	}
	rep.After = rep.Before

	var errs []error
	touched := map[hub.Repo]map[string]bool{} // repo → etags of blobs removed
	remove := func(e Entry, reason string) {
		if ctx.Err() != nil {
			return
		}
		if !opts.DryRun {
			if err := removeEntry(l, e); err != nil {
				errs = append(errs, err)
				return
			}
			if touched[e.Repo] == nil {
				touched[e.Repo] = map[string]bool{}
			}
			if !e.Partial {
				touched[e.Repo][e.ETag] = true
			}
		}
		rep.Removed = append(rep.Removed, Pruned{Entry: e, Reason: reason})
		rep.Freed += e.Bytes
		rep.After -= e.Bytes
	}
	for _, o := range inv.orphans {
		if now.Sub(o.mtime) < stale || ctx.Err() != nil {
			continue
		}
		if !opts.DryRun {
			if err := os.RemoveAll(o.path); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		rep.Freed += o.bytes
		rep.Removed = append(rep.Removed, Pruned{Entry: Entry{ETag: filepath.Base(o.path), Bytes: o.bytes, LastAccess: o.mtime}, Reason: "orphan"})
	}

	// Least recently used first; recent partials are in use.
	filePins, err := cache.ReadPins(dir)
	if err != nil {
		return PruneReport{}, err
	}
	pins := cache.ResolvePins(dir, append(slices.Clone(opts.Pins), filePins...))
	lru := slices.Clone(inv.entries)
	slices.SortStableFunc(lru, func(a, b Entry) int { return a.LastAccess.Compare(b.LastAccess) })
	kept := lru[:0]
	for _, e := range lru {
		switch {
		case pins.Covers(e.Repo, e.ETag):
			rep.Pinned += e.Bytes
			continue
		case e.Partial && now.Sub(e.LastAccess) < stale:
		case opts.OlderThan > 0 && now.Sub(e.LastAccess) >= opts.OlderThan:
			remove(e, "older-than")
			continue
		}
		kept = append(kept, e)
	}
	if opts.MaxBytes > 0 {
		for _, e := range kept {
			if rep.After <= opts.MaxBytes {
				break
			}
			if e.Partial && now.Sub(e.LastAccess) < stale {
				continue
			}
			remove(e, "size")
		}
		rep.Over = rep.After > opts.MaxBytes
	}
	for r, etags := range touched {
		if len(etags) > 0 {
			errs = append(errs, l.RemoveDanglingLinks(r, etags))
		}
		errs = append(errs, tidyRepo(l, r))
	}
	return rep, errors.Join(append(errs, ctx.Err())...)
}
