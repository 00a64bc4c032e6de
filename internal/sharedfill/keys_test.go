package sharedfill

import (
	"context"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// One file's chunks spread over the shards (so that one hot file meets many
// of the store's per-prefix limits, not one), and each key parses back to
// its kind and file.
func TestKeysSpreadOverShards(t *testing.T) {
	const chunks = 512
	shards := map[string]int{}
	for i := range int64(chunks) {
		key := ChunkKey(etagOf(1), 8<<20, i)
		k, ok := parseKey(key)
		if !ok || k.kind != kindChunk || k.etag != etagOf(1) {
			t.Fatalf("%s parsed as %+v, %v", key, k, ok)
		}
		shards[key[len(layoutPrefix):len(layoutPrefix)+2]]++
	}
	// 512 chunks over 256 shards: a fair hash leaves about 256/e^2 = 35 empty.
	if len(shards) < 200 {
		t.Fatalf("512 chunks of one file landed in %d shards", len(shards))
	}
	for n, c := range shards {
		if c > 12 {
			t.Fatalf("shard %s holds %d of 512 chunks", n, c)
		}
	}
	s := &Sharer{opts: Options{ChunkSize: 8 << 20}}
	claim := s.claimKey(chunkID{etagOf(1), 7}, 3)
	if !IsClaimKey(claim) || IsClaimKey(ChunkKey(etagOf(1), 8<<20, 7)) || claim[:len(layoutPrefix)+2] != ChunkKey(etagOf(1), 8<<20, 7)[:len(layoutPrefix)+2] {
		t.Fatalf("claim key %s: not a claim, or not in its chunk's shard", claim)
	}
	for _, bad := range []string{"v4/clock", "v3/chunks/" + etagOf(1) + "/8388608/0", "v4/zzz/chunks/e/1/0", "v4/ab/chunks//1/0", "v4/ab/other/e/1/0", "v4/ab/chunks/e/1"} {
		if k, ok := parseKey(bad); ok {
			t.Errorf("%q parsed as %+v", bad, k)
		}
	}
}

// Forget finds a file's chunks in every shard, and only that file's; Prune
// deletes the objects of the layout before this one (v3 kept a file's
// chunks under one prefix) and leaves the clock.
func TestForgetAcrossShardsAndPruneOfV3(t *testing.T) {
	ctx := context.Background()
	store, err := sharedstore.Open(ctx, "file://"+t.TempDir(), sharedstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := newSharer(t, store, nil, Options{})
	for _, etag := range []string{etagOf(1), etagOf(2)} {
		for i := range int64(40) {
			if err := store.Create(ctx, s.chunkKey(chunkID{etag, i}), []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	old := "v3/chunks/" + etagOf(3) + "/8388608/0"
	for _, k := range []string{old, clockKey} {
		if err := store.Create(ctx, k, []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Forget(ctx, etagOf(1)); n != 40 || err != nil {
		t.Fatalf("Forget deleted %d objects (%v); want the file's 40", n, err)
	}
	inv, err := Take(ctx, store, time.Now())
	if err != nil || len(inv.Files) != 1 || inv.Files[0].ETag != etagOf(2) || inv.Files[0].Chunks != 40 || inv.Old != 1 || inv.Other != 0 {
		t.Fatalf("after Forget: %+v, %v", inv, err)
	}
	rep, err := Prune(ctx, store, PruneOptions{}, time.Now())
	if err != nil || rep.Old != 1 || len(rep.Removed) != 0 {
		t.Fatalf("prune %+v, %v", rep, err)
	}
	if _, err := store.Stat(ctx, old); err == nil {
		t.Error("the v3 chunk survived Prune")
	}
	if _, err := store.Stat(ctx, clockKey); err != nil {
		t.Errorf("Prune took the store clock: %v", err)
	}
}
