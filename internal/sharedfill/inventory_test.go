package sharedfill

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

func TestInventoryAndPrune(t *testing.T) {
	dir := t.TempDir()
	store, err := sharedstore.Open(context.Background(), "file://"+dir, sharedstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := newSharer(t, store, nil, Options{})
	now := time.Now()
	// Three files of 3, 2 and 1 chunks, put 30, 10 and 1 days ago; a
	// claim in flight and one a dead node left.
	put := func(etag string, chunks int, age time.Duration) {
		for i := range chunks {
			key := s.chunkKey(chunkID{etag, int64(i)})
			if err := store.Create(ctx, key, make([]byte, 1000)); err != nil {
				t.Fatal(err)
			}
			touch(t, dir, key, now.Add(-age))
		}
	}
	put(etagOf(10), 3, 30*24*time.Hour)
	put(etagOf(11), 2, 10*24*time.Hour)
	put(etagOf(12), 1, 24*time.Hour)
	live, dead := s.claimKey(chunkID{etagOf(13), 0}, 0), s.claimKey(chunkID{etagOf(14), 0}, 0)
	store.Create(ctx, live, []byte("{}"))
	store.Create(ctx, dead, []byte("{}"))
	touch(t, dir, dead, now.Add(-2*time.Hour))

	inv, err := Take(ctx, store, now)
	if err != nil || len(inv.Files) != 3 || inv.Bytes() != 6000 || inv.Claims != 2 || inv.StaleClaims != 1 || inv.Files[0].ETag != etagOf(10) || inv.Files[0].Chunks != 3 {
		t.Fatalf("inventory %+v, %v", inv, err)
	}

	// A dry run removes nothing; then the oldest goes by age, the next by
	// the budget, a pinned one never.
	o := PruneOptions{OlderThan: 20 * 24 * time.Hour, MaxBytes: 1500, DryRun: true,
		Keep: func(etag string) bool { return etag == etagOf(12) }}
	rep, err := Prune(ctx, store, o, now)
	if err != nil || len(rep.Removed) != 2 || rep.Freed != 5000 || rep.Claims != 1 {
		t.Fatalf("dry run %+v, %v", rep, err)
	}
	if inv2, _ := Take(ctx, store, now); inv2.Bytes() != 6000 || inv2.Claims != 2 {
		t.Fatalf("the dry run removed something: %+v", inv2)
	}
	o.DryRun = false
	rep, err = Prune(ctx, store, o, now)
	if err != nil || len(rep.Removed) != 2 || rep.Removed[0].Reason != "older-than" || rep.Removed[1].Reason != "max-bytes" ||
		rep.After != 1000 || rep.Over || rep.Claims != 1 {
		t.Fatalf("prune %+v, %v", rep, err)
	}
	inv, _ = Take(ctx, store, now)
	if len(inv.Files) != 1 || inv.Files[0].ETag != etagOf(12) || inv.Claims != 1 {
		t.Fatalf("after prune %+v", inv)
	}
	if _, err := store.Stat(ctx, live); err != nil {
		t.Errorf("the live claim went: %v", err)
	}
	// With the last one pinned, a budget it exceeds leaves the store over.
	rep, _ = Prune(ctx, store, PruneOptions{MaxBytes: 10, Keep: o.Keep}, now)
	if !rep.Over || len(rep.Removed) != 0 {
		t.Fatalf("pinned: %+v", rep)
	}
}

func touch(t *testing.T, dir, key string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(key)), at, at); err != nil {
		t.Fatal(err)
	}
}
