package sharedfill

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// StoredFile is what the store holds of one file (one content hash): its
// chunks, of every chunk size nodes used.
type StoredFile struct {
	ETag   string
	Chunks int
	Bytes  int64
	// LastPut is when its newest chunk was put: object stores keep no
	// access time, so this is the best age there is.
	LastPut time.Time
}

// Inventory is the store's content, by file, largest first, and the claims
// it holds (in flight, or left by nodes that died).
type Inventory struct {
	Files       []StoredFile
	Claims      int
	StaleClaims int // older than staleClaimAge: left by a node that died
	Other       int // objects under the layout's prefix (v4/) that are neither
	// Old and OldBytes are the objects of older layouts (v1/, v2/), which
	// no node of this version reads: Prune deletes them.
	Old      int
	OldBytes int64
}

// oldLayouts are the prefixes of layouts before layoutPrefix. Their chunks
// cannot be trusted (no seal), so they are never read, only removed.
func oldLayouts() []string { return []string{"v1/", "v2/", "v3/"} }

// staleClaimAge is how old a claim must be for prune to delete it: far past
// any lease, so only claims of nodes that died mid-chunk.
const staleClaimAge = time.Hour

// Lister is what Inventory and Prune need of the store.
type Lister interface {
	List(ctx context.Context, prefix string, fn func(sharedstore.Object) error) error
	Delete(ctx context.Context, key string) error
}

// Take lists the store's chunks and claims, and counts the objects of
// older layouts.
func Take(ctx context.Context, store Lister, now time.Time) (Inventory, error) {
	var inv Inventory
	files := map[string]*StoredFile{}
	err := store.List(ctx, layoutPrefix, func(o sharedstore.Object) error {
		k, ok := parseKey(o.Key)
		switch {
		case ok && k.kind == kindChunk && hub.ETagKind(k.etag) != hub.HashUnknown:
			f := files[k.etag]
			if f == nil {
				f = &StoredFile{ETag: k.etag}
				files[k.etag] = f
			}
			f.Chunks++
			f.Bytes += o.Size
			if o.ModTime.After(f.LastPut) {
				f.LastPut = o.ModTime
			}
		case ok && k.kind == kindClaim:
			inv.Claims++
			if now.Sub(o.ModTime) > staleClaimAge {
				inv.StaleClaims++
			}
		case o.Key == clockKey:
		default:
			inv.Other++
		}
		return nil
	})
	for _, p := range oldLayouts() {
		if err != nil {
			break
		}
		err = store.List(ctx, p, func(o sharedstore.Object) error {
			inv.Old++
			inv.OldBytes += o.Size
			return nil
		})
	}
	for _, f := range files {
		inv.Files = append(inv.Files, *f)
	}
	slices.SortFunc(inv.Files, func(a, b StoredFile) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.ETag, b.ETag))
	})
	return inv, err
}

// Bytes is the chunks' total size.
func (inv Inventory) Bytes() int64 {
	var n int64
	for _, f := range inv.Files {
		n += f.Bytes
	}
	return n
}

// PruneOptions say what Prune removes. Object stores have no LRU, so files
// go by the age of their newest chunk.
type PruneOptions struct {
	OlderThan time.Duration // remove files whose newest chunk is older; 0 = no age limit
	MaxBytes  int64         // then remove the oldest files until the rest fit; 0 = no budget
	DryRun    bool
	// Keep, when set, spares files it returns true for (pinned models).
	Keep func(etag string) bool
}

// Pruned is one file Prune removed (or would).
type Pruned struct {
	StoredFile
	Reason string // "older-than" or "max-bytes"
}

// PruneReport is what Prune did.
type PruneReport struct {
	Removed       []Pruned
	Freed         int64
	Before, After int64 // bytes of chunks
	Claims        int   // stale claims deleted
	Over          bool  // still over MaxBytes: what is left is kept
	// Old and OldBytes are the objects of older layouts deleted (or, with
	// DryRun, that would be).
	Old      int
	OldBytes int64
}

// Prune removes whole files' chunks from the store (a file half gone would
// only be refetched chunk by chunk), the claims nodes that died left
// behind, and every object of an older layout (oldLayouts), which no node
// reads any more. A node reading a pruned file fetches it again from
// upstream.
func Prune(ctx context.Context, store Lister, o PruneOptions, now time.Time) (PruneReport, error) {
	inv, err := Take(ctx, store, now)
	if err != nil {
		return PruneReport{}, err
	}
	rep := PruneReport{Before: inv.Bytes()}
	files := slices.Clone(inv.Files)
	slices.SortFunc(files, func(a, b StoredFile) int { return a.LastPut.Compare(b.LastPut) }) // oldest first
	left := rep.Before
	var victims []Pruned
	for _, f := range files {
		if o.Keep != nil && o.Keep(f.ETag) {
			continue
		}
		switch {
		case o.OlderThan > 0 && now.Sub(f.LastPut) > o.OlderThan:
			victims = append(victims, Pruned{f, "older-than"})
		case o.MaxBytes > 0 && left > o.MaxBytes:
			victims = append(victims, Pruned{f, "max-bytes"})
		default:
			continue
		}
		left -= f.Bytes
	}
	rep.Over = o.MaxBytes > 0 && left > o.MaxBytes
	if o.DryRun {
		for _, v := range victims {
			rep.Removed = append(rep.Removed, v)
			rep.Freed += v.Bytes
		}
		rep.After = rep.Before - rep.Freed
		rep.Claims = inv.StaleClaims
		rep.Old, rep.OldBytes = inv.Old, inv.OldBytes
		return rep, nil
	}
	// One pass over the layout deletes the victims' chunks (a file's chunks
	// are spread over every shard, keys.go) and the stale claims.
	doomed := make(map[string]bool, len(victims))
	for _, v := range victims {
		doomed[v.ETag] = true
	}
	failed := map[string]bool{} // etags of which a chunk could not be deleted
	var objs []sharedstore.Object
	err = store.List(ctx, layoutPrefix, func(ob sharedstore.Object) error {
		k, ok := parseKey(ob.Key)
		if ok && (k.kind == kindChunk && doomed[k.etag] || k.kind == kindClaim && now.Sub(ob.ModTime) > staleClaimAge) {
			objs = append(objs, ob)
		}
		return nil
	})
	errs := []error{err}
	for _, ob := range objs {
		k, _ := parseKey(ob.Key)
		if err := store.Delete(ctx, ob.Key); err != nil {
			errs = append(errs, err)
			if k.kind == kindChunk {
				failed[k.etag] = true
			}
			continue
		}
		if k.kind == kindClaim {
			rep.Claims++
		}
	}
	for _, v := range victims {
		if err == nil && !failed[v.ETag] {
			rep.Removed = append(rep.Removed, v)
			rep.Freed += v.Bytes
		}
	}
	rep.After = rep.Before - rep.Freed
	for _, p := range oldLayouts() {
		n, b, err := deletePrefix(ctx, store, p, nil)
		rep.Old += n
		rep.OldBytes += b
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// deletePrefix deletes the objects under prefix that match (all if nil)
// and returns how many it deleted, and their bytes.
func deletePrefix(ctx context.Context, store Lister, prefix string, match func(sharedstore.Object) bool) (int, int64, error) {
	var objs []sharedstore.Object
	err := store.List(ctx, prefix, func(o sharedstore.Object) error {
		if match == nil || match(o) {
			objs = append(objs, o)
		}
		return nil
	})
	errs := []error{err}
	n, bytes := 0, int64(0)
	for _, o := range objs {
		if err := store.Delete(ctx, o.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
		bytes += o.Size
	}
	return n, bytes, errors.Join(errs...)
}
