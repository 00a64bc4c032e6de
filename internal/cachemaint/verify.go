package cachemaint

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/hub"
)

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
	l := cache.NewLayout(dir)
	if opts.Fix {
		if err := l.CheckVersion(); err != nil {
			return VerifyReport{}, err
		}
		// Deleting under a running server would pull files from under it.
		unlock, err := l.Lock()
		if err != nil {
			return VerifyReport{}, err
		}
		defer unlock()
	}
	inv, err := scan(dir)
	if err != nil {
		return VerifyReport{}, err
	}
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
		got, rerr := hashBlob(ctx, l.Blob(e.Repo, e.ETag))
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
				if err := removeEntry(l, e); err != nil {
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
		removed := map[hub.Repo]map[string]bool{}
		for _, c := range rep.Corrupt {
			if c.Removed {
				if removed[c.Repo] == nil {
					removed[c.Repo] = map[string]bool{}
				}
				removed[c.Repo][c.ETag] = true
			}
		}
		// One walk per repo removes the links of every blob deleted.
		for r, etags := range removed {
			err = errors.Join(err, l.RemoveDanglingLinks(r, etags), tidyRepo(l, r))
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
	got, err := hub.HashContent(ctx, f, hub.ETagKind(filepath.Base(name)), info.Size())
	if at, ok := accessTime(info); ok {
		_ = os.Chtimes(name, at, info.ModTime())
	}
	return got, err
}
