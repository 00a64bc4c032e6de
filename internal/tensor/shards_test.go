package tensor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/header"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// livenessGuard only turns a hang into a failure: it is far longer than any
// of these tests needs, and no test passes or fails on how long it took.
const livenessGuard = time.Minute

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(livenessGuard):
		t.Fatalf("still waiting for %s", what)
		panic("unreachable")
	}
}

// TestListStopsAtFirstMissingShard is the fan-out reported upstream: an index
// naming 2,000 shards that are all missing. Every shard used to be tried (2,000
// upstream requests for one listing); now the first 404 ends the listing, so
// at most one round of concurrent reads reaches the upstream.
func TestListStopsAtFirstMissingShard(t *testing.T) {
	fake := newFakeFiles(map[string][]byte{"model.safetensors.index.json": shardIndex(2000)})
	s := New(fake, Options{})
	_, err := s.List(t.Context(), hub.Caller{}, testRef(""))
	if !isMissingFile(err) {
		t.Fatalf("List = %v, want the missing shard's 404", err)
	}
	if n := fake.OpensOf("model-"); n < 1 || n > shardReads {
		t.Errorf("%d shard opens, want between 1 and %d", n, shardReads)
	}
	// model.safetensors (missing), the index, and the shards.
	if n := fake.Opens(); n > 2+shardReads {
		t.Errorf("%d opens in all, want at most %d", n, 2+shardReads)
	}
}

// TestHeadersCancelsReadsInFlightAfterFirstFailure gates the fake so that
// shardReads reads are in flight, then lets exactly one fail. Headers must
// cancel the others through a context derived from the caller's, start no
// further shard, and return that failure.
func TestHeadersCancelsReadsInFlightAfterFirstFailure(t *testing.T) {
	const shards = 2000
	type callerKey struct{}
	var (
		mu                    sync.Mutex
		inFlight, maxInFlight int
		cancelled, foreign    int
	)
	started := make(chan string, shards)
	failOne := make(chan struct{})
	fake := newFakeFiles(nil)
	fake.missing = func(ctx context.Context, p string) error {
		mu.Lock()
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		if ctx.Value(callerKey{}) == nil {
			foreign++
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		started <- p
		select {
		case <-failOne:
			return notFound(p)
		case <-ctx.Done():
			mu.Lock()
			cancelled++
			mu.Unlock()
			return ctx.Err()
		}
	}
	l := Layout{Commit: fakeCommit}
	for i := range shards {
		l.Files = append(l.Files, fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, shards))
	}
	s := New(fake, Options{})
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), callerKey{}, true))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.Headers(ctx, hub.Caller{}, testRepo(), l)
		done <- err
	}()
	for i := range shardReads {
		receive(t, started, fmt.Sprintf("shard read %d of %d to start", i+1, shardReads))
	}
	failOne <- struct{}{} // exactly one read fails; the rest wait for their context
	var err error
	select {
	case err = <-done:
	case <-time.After(livenessGuard):
		cancel() // unblock the reads so the counts below can be reported
		err = <-done
		t.Errorf("Headers did not return after the first failure: the reads in flight were not cancelled")
	}
	var se *fetch.StatusError
	if !errors.As(err, &se) || se.Code != 404 || !strings.Contains(se.URL, "model-") {
		t.Errorf("Headers = %v, want the failed shard's 404", err)
	}
	mu.Lock()
	defer mu.Unlock()
	opens := fake.Opens()
	if opens > shardReads+1 {
		t.Errorf("%d shard opens, want at most %d", opens, shardReads+1)
	}
	if maxInFlight > shardReads {
		t.Errorf("%d reads in flight at once, want at most %d", maxInFlight, shardReads)
	}
	if cancelled != opens-1 {
		t.Errorf("%d reads saw their context cancelled, want %d (all but the failed one)", cancelled, opens-1)
	}
	if foreign != 0 {
		t.Errorf("%d reads ran on a context not derived from the caller's", foreign)
	}
	if inFlight != 0 {
		t.Errorf("%d reads still in flight after Headers returned", inFlight)
	}
}

// TestHeadersStartsNothingForAGoneCaller checks that a caller that has
// already given up costs no upstream request, however many shards there are.
func TestHeadersStartsNothingForAGoneCaller(t *testing.T) {
	fake := newFakeFiles(nil)
	s := New(fake, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	l := Layout{Commit: fakeCommit}
	for i := range 100 {
		l.Files = append(l.Files, fmt.Sprintf("model-%05d-of-00100.safetensors", i+1))
	}
	if _, err := s.Headers(ctx, hub.Caller{}, testRepo(), l); !errors.Is(err, context.Canceled) {
		t.Fatalf("Headers = %v, want context.Canceled", err)
	}
	if n := fake.Opens(); n != 0 {
		t.Fatalf("%d opens for a cancelled caller, want 0", n)
	}
}

// TestListRefusesIndexOverShardLimit: an index naming 10,001 shard files is
// refused as the index's own fault, before any shard is read, so the server
// answers 502 InvalidSafetensors naming the index.
func TestListRefusesIndexOverShardLimit(t *testing.T) {
	const index = "model.safetensors.index.json"
	fake := newFakeFiles(map[string][]byte{index: shardIndex(10_001)})
	s := New(fake, Options{})
	_, err := s.List(t.Context(), hub.Caller{}, testRef(""))
	var fe *FileError
	if !errors.As(err, &fe) || fe.Path != index {
		t.Fatalf("List = %v (%T), want a *FileError for %s", err, err, index)
	}
	var he *header.FormatError
	if !errors.As(err, &he) || he.Kind != header.InvalidIndex || !strings.Contains(err.Error(), "10000") {
		t.Fatalf("List = %v, want InvalidIndex naming the 10000-shard limit", err)
	}
	if n := fake.OpensOf("model-"); n != 0 {
		t.Fatalf("%d shard opens, want none", n)
	}
}

// TestListShardedRepo checks that bounding the reads loses nothing: a repo of
// more shards than shardReads lists every tensor, in index order, and a
// second listing is served from the header cache.
func TestListShardedRepo(t *testing.T) {
	const shards, perShard = 3*shardReads + 1, 3
	files := map[string][]byte{}
	for _, f := range hubtest.ShardedModel("", shards, perShard, 2, 4) {
		files[f.Path] = f.Data
	}
	fake := newFakeFiles(files)
	var mu sync.Mutex
	seen := map[string]int{}
	s := New(fake, Options{Observe: func(r string) {
		mu.Lock()
		seen[r]++
		mu.Unlock()
	}})
	for round := range 2 {
		got, err := s.List(t.Context(), hub.Caller{}, testRef(""))
		if err != nil {
			t.Fatal(err)
		}
		if got.Index != "model.safetensors.index.json" || len(got.Files) != shards || got.Totals().Tensors != shards*perShard {
			t.Fatalf("round %d: index %q, %d files, %d tensors; want %d files, %d tensors",
				round, got.Index, len(got.Files), got.Totals().Tensors, shards, shards*perShard)
		}
		for i, f := range got.Files {
			if want := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, shards); f.Path != want {
				t.Fatalf("file %d is %s, want %s", i, f.Path, want)
			}
		}
		for i, e := range decodeListing(t, got).Tensors {
			if want := fmt.Sprintf("model.layers.%d.weight", i); e.Name != want || e.File != got.Files[i/perShard].Path || e.Length != 16 {
				t.Fatalf("tensor %d is %+v, want %s in %s", i, e, want, got.Files[i/perShard].Path)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["parsed"] != shards || seen["cached"] != shards {
		t.Fatalf("headers parsed %d and cached %d times, want %d each", seen["parsed"], seen["cached"], shards)
	}
}
