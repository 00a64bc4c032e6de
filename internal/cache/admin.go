package cache

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// Offline maintenance of a cache directory (hubproxy cache ls|du|verify|prune).
// These functions work on the tree alone: no Store need be open, and any
// HF_HUB_CACHE (with or without hubproxy's .hubproxy/) can be inspected.
//
// Running them next to a live server is safe in the sense that nothing it
// serves can become wrong: a reader holding a deleted blob keeps reading the
// unlinked file, and the Store refetches a blob that vanished behind its back.
// But a partial deleted while it is being filled makes that fill fail once,
// and the server's byte accounting stays stale until it restarts; so Prune
// leaves partials touched within StaleAfter alone, and callers should prefer
// to prune a cache no server is using.

// Entry is one stored file: a verified blob or a partial being filled.
type Entry struct {
	Repo       hub.Repo
	ETag       string
	Partial    bool
	Size       int64     // the file's full size
	Bytes      int64     // what it holds on disk: Size for a blob, present bytes for a partial
	LastAccess time.Time // blobs: the later of access and modification time; partials: last write
}

// RepoUsage sums one repository's share of a cache directory.
type RepoUsage struct {
	Repo         hub.Repo
	Blobs        int
	BlobBytes    int64
	Partials     int
	PartialBytes int64 // bytes present in partial files
	Snapshots    int   // commits with a snapshots/ folder
	LastAccess   time.Time
}

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

// List returns every blob and partial under dir, sorted by repo and ETag.
func List(dir string) ([]Entry, error) {
	inv, err := scan(dir)
	if err != nil {
		return nil, err
	}
	return inv.entries, nil
}

// Usage sums List per repository, sorted by repo; repos holding nothing but
// snapshot folders or refs are included with zero bytes.
func Usage(dir string) ([]RepoUsage, error) {
	inv, err := scan(dir)
	if err != nil {
		return nil, err
	}
	byRepo := map[hub.Repo]*RepoUsage{}
	get := func(r hub.Repo) *RepoUsage {
		if byRepo[r] == nil {
			byRepo[r] = &RepoUsage{Repo: r}
		}
		return byRepo[r]
	}
	for r, n := range inv.snapshots {
		get(r).Snapshots = n
	}
	for _, e := range inv.entries {
		u := get(e.Repo)
		if e.Partial {
			u.Partials++
			u.PartialBytes += e.Bytes
		} else {
			u.Blobs++
			u.BlobBytes += e.Bytes
		}
		if e.LastAccess.After(u.LastAccess) {
			u.LastAccess = e.LastAccess
		}
	}
	out := make([]RepoUsage, 0, len(byRepo))
	for _, u := range byRepo {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b RepoUsage) int { return cmp.Compare(a.Repo.String(), b.Repo.String()) })
	return out, nil
}

// scan walks dir's repositories and .hubproxy/partial.
func scan(dir string) (*inventory, error) {
	p := paths{root: dir}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	inv := &inventory{snapshots: map[hub.Repo]int{}}
	for _, e := range ents {
		repo, ok := parseRepoDir(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		if snaps, err := os.ReadDir(filepath.Join(dir, e.Name(), "snapshots")); err == nil {
			inv.snapshots[repo] = len(snaps)
		}
		blobs, err := os.ReadDir(filepath.Join(dir, e.Name(), "blobs"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cache: %w", err)
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
	if err := inv.scanPartials(p); err != nil {
		return nil, err
	}
	slices.SortFunc(inv.entries, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Repo.String(), b.Repo.String()), cmp.Compare(a.ETag, b.ETag))
	})
	return inv, nil
}

// scanPartials reads every sidecar. Data files are claimed by valid sidecars;
// the rest of partial/ and everything in tmp/ are orphans.
func (inv *inventory) scanPartials(p paths) error {
	ents, err := os.ReadDir(p.partial())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	claimed := map[string]bool{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		name := filepath.Join(p.partial(), e.Name())
		b, err := os.ReadFile(name)
		var sc sidecar
		if err != nil || json.Unmarshal(b, &sc) != nil {
			continue
		}
		f, err := sc.file()
		if err != nil || p.sidecar(f.Repo, f.ETag) != name {
			continue
		}
		data, err := os.Stat(p.partialData(f.Repo, f.ETag))
		if err != nil || !data.Mode().IsRegular() {
			continue
		}
		side, err := os.Stat(name)
		if err != nil {
			continue
		}
		present := sc.Present.Clone()
		present.Remove(ranges.Range{Pos: min(f.Size, data.Size()), End: 1<<63 - 1})
		claimed[name], claimed[p.partialData(f.Repo, f.ETag)] = true, true
		last := data.ModTime()
		if side.ModTime().After(last) {
			last = side.ModTime()
		}
		inv.entries = append(inv.entries, Entry{Repo: f.Repo, ETag: f.ETag, Partial: true, Size: f.Size,
			Bytes: present.Size(), LastAccess: last})
	}
	for _, e := range ents {
		name := filepath.Join(p.partial(), e.Name())
		if !claimed[name] {
			inv.addOrphan(name, e)
		}
	}
	if tmps, err := os.ReadDir(p.tmp()); err == nil {
		for _, e := range tmps {
			inv.addOrphan(filepath.Join(p.tmp(), e.Name()), e)
		}
	}
	return nil
}

func (inv *inventory) addOrphan(name string, e fs.DirEntry) {
	if info, err := e.Info(); err == nil {
		inv.orphans = append(inv.orphans, orphan{path: name, bytes: info.Size(), mtime: info.ModTime()})
	}
}

// lastAccess is the later of a file's access and modification times. The
// access time is read from the platform's stat structure by field name (Atim
// on Linux, Atimespec on the BSDs and macOS), so this needs no build tags; on
// a filesystem mounted noatime it is simply the modification time.
func lastAccess(info fs.FileInfo) time.Time {
	t := info.ModTime()
	if at, ok := accessTime(info); ok && at.After(t) {
		t = at
	}
	return t
}

func accessTime(info fs.FileInfo) (time.Time, bool) {
	v := reflect.ValueOf(info.Sys())
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return time.Time{}, false
	}
	for _, name := range []string{"Atim", "Atimespec"} {
		f := v.Elem().FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Struct {
			continue
		}
		sec, nsec := f.FieldByName("Sec"), f.FieldByName("Nsec")
		if sec.IsValid() && nsec.IsValid() && sec.CanInt() && nsec.CanInt() {
			return time.Unix(sec.Int(), nsec.Int()), true
		}
	}
	return time.Time{}, false
}

// checkLayout refuses to modify a tree that a hubproxy with another layout
// version wrote. A tree without .hubproxy/version (a plain HF_HUB_CACHE) is
// fine.
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

// removeEntry deletes a blob and the snapshot links pointing at it, or a
// partial's data file and sidecar.
func removeEntry(p paths, e Entry) error {
	rm := func(name string) error {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if e.Partial {
		return errors.Join(rm(p.partialData(e.Repo, e.ETag)), rm(p.sidecar(e.Repo, e.ETag)))
	}
	return errors.Join(rm(p.blob(e.Repo, e.ETag)), p.removeLinksTo(e.Repo, e.ETag))
}

// tidyRepo removes the empty folders left under a repo's snapshots/, and the
// whole repo folder (refs included) once it holds no blob and no snapshot
// file, as huggingface_hub's delete-cache leaves nothing behind either.
func tidyRepo(p paths, r hub.Repo) error {
	snaps := filepath.Join(p.repo(r), "snapshots")
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
	blobs, err := os.ReadDir(filepath.Join(p.repo(r), "blobs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if files == 0 && len(blobs) == 0 {
		return os.RemoveAll(p.repo(r))
	}
	return nil
}

// forEach runs fn over items on at most workers goroutines until ctx ends.
func forEach[T any](ctx context.Context, items []T, workers int, fn func(T) error) error {
	work := make(chan T)
	errs := make([]error, max(1, workers))
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			for it := range work {
				if errs[i] == nil {
					errs[i] = fn(it)
				}
			}
		})
	}
feed:
	for _, it := range items {
		select {
		case work <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Fix deletes corrupt blobs and the snapshot links pointing at them, so
	// the next request refetches them.
	Fix bool
	// Workers bounds concurrent hashing; default 2.
	Workers int
	// Progress, if set, is called after each blob (one call at a time).
	Progress func(e Entry, ok bool)
}

// Corrupt is a blob whose content does not hash to its name.
type Corrupt struct {
	Entry
	Got     string // what the content hashes to; "" if it could not be read
	Err     error  // the read error, if any
	Removed bool   // deleted by Fix
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	Checked int
	Bytes   int64
	Corrupt []Corrupt // sorted by repo and ETag
}

// Verify re-hashes every blob under dir (sha256 for 64-hex names, git blob
// sha1 for 40-hex ones) and reports those that do not match. Partials are
// skipped: they are verified when they complete. Access times are restored
// after reading, so verifying does not make every blob look recently used.
func Verify(ctx context.Context, dir string, opts VerifyOptions) (VerifyReport, error) {
	if opts.Fix {
		if err := checkLayout(dir); err != nil {
			return VerifyReport{}, err
		}
		// Deleting under a running server would pull files from under it.
		lock, err := lockDir(dir)
		if err != nil {
			return VerifyReport{}, err
		}
		defer lock.unlock()
	}
	inv, err := scan(dir)
	if err != nil {
		return VerifyReport{}, err
	}
	p := paths{root: dir}
	var blobs []Entry
	for _, e := range inv.entries {
		if !e.Partial {
			blobs = append(blobs, e)
		}
	}
	var (
		mu  sync.Mutex
		rep VerifyReport
	)
	err = forEach(ctx, blobs, cmp.Or(opts.Workers, 2), func(e Entry) error {
		got, rerr := hashBlob(ctx, p.blob(e.Repo, e.ETag))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ok := rerr == nil && got == e.ETag
		mu.Lock()
		defer mu.Unlock()
		rep.Checked++
		rep.Bytes += e.Bytes
		if !ok {
			c := Corrupt{Entry: e, Got: got, Err: rerr}
			if opts.Fix {
				if err := removeEntry(p, e); err != nil {
					return err
				}
				c.Removed = true
			}
			rep.Corrupt = append(rep.Corrupt, c)
		}
		if opts.Progress != nil {
			opts.Progress(e, ok)
		}
		return nil
	})
	slices.SortFunc(rep.Corrupt, func(a, b Corrupt) int {
		return cmp.Or(cmp.Compare(a.Repo.String(), b.Repo.String()), cmp.Compare(a.ETag, b.ETag))
	})
	if opts.Fix {
		for _, c := range rep.Corrupt {
			err = errors.Join(err, tidyRepo(p, c.Repo))
		}
	}
	return rep, err
}

// hashBlob hashes a blob as its name's kind says, then puts its access time
// back.
func hashBlob(ctx context.Context, name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	got, err := hashFile(ctx, f, info.Size(), hub.ETagKind(filepath.Base(name)))
	if at, ok := accessTime(info); ok {
		_ = os.Chtimes(name, at, info.ModTime())
	}
	return got, err
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
	Over          bool // After is still above MaxBytes: what is left is protected by StaleAfter
}

// Prune removes orphaned files, then entries unused for OlderThan, then the
// least recently used entries until the total is at most MaxBytes. A blob
// goes with the snapshot links that point at it, and a repo left with
// nothing goes entirely.
func Prune(ctx context.Context, dir string, opts PruneOptions) (PruneReport, error) {
	if opts.MaxBytes < 0 || opts.OlderThan < 0 || opts.StaleAfter < 0 {
		return PruneReport{}, errors.New("cache: negative prune option")
	}
	if err := checkLayout(dir); err != nil {
		return PruneReport{}, err
	}
	if !opts.DryRun {
		lock, err := lockDir(dir)
		if err != nil {
			return PruneReport{}, err
		}
		defer lock.unlock()
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
	p := paths{root: dir}
	var rep PruneReport
	for _, e := range inv.entries {
		rep.Before += e.Bytes
	}
	rep.After = rep.Before

	var errs []error
	touched := map[hub.Repo]bool{}
	remove := func(e Entry, reason string) {
		if ctx.Err() != nil {
			return
		}
		if !opts.DryRun {
			if err := removeEntry(p, e); err != nil {
				errs = append(errs, err)
				return
			}
			touched[e.Repo] = true
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
	lru := slices.Clone(inv.entries)
	slices.SortStableFunc(lru, func(a, b Entry) int { return a.LastAccess.Compare(b.LastAccess) })
	kept := lru[:0]
	for _, e := range lru {
		switch {
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
	for r := range touched {
		errs = append(errs, tidyRepo(p, r))
	}
	return rep, errors.Join(append(errs, ctx.Err())...)
}
