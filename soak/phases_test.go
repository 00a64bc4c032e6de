package soak

import (
	"github.com/hubproxy/hubproxy/internal/sharedfill"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// The small-disk node's ranges: inside the file, of the length asked, one
// in each part of it, the last at its end, and the same for the same seed.
func TestSpreadRanges(t *testing.T) {
	const size, n, length = 200 << 20, 4, 1 << 20
	for _, seed := range []uint64{0, 1, 42, 1 << 63} {
		rs := spreadRanges(size, n, length, seed)
		if len(rs) != n {
			t.Fatalf("%d ranges, want %d", len(rs), n)
		}
		for i, r := range rs {
			part := int64(size / n)
			if r[0] < int64(i)*part || r[1] >= min(int64(i+1)*part, size) && i < n-1 || r[1]-r[0]+1 != length {
				t.Errorf("seed %d: range %d is %v, want %d bytes inside [%d, %d)", seed, i, r, length, int64(i)*part, int64(i+1)*part)
			}
		}
		if rs[n-1][1] != size-1 {
			t.Errorf("seed %d: the last range ends at %d, not the file's end", seed, rs[n-1][1])
		}
		if again := spreadRanges(size, n, length, seed); again[0] != rs[0] {
			t.Errorf("seed %d: %v, then %v", seed, rs[0], again[0])
		}
	}
	if rs := spreadRanges(3<<20, 4, 1<<20, 5); rs[0][0] != 0 || rs[3][1] != 3<<20-1 {
		t.Errorf("a file of parts shorter than a range: %v", rs)
	}
}

// A reader waiting on a slow owner fetches its bytes of the chunk around it
// while the owner still fetches the whole chunk: the cluster ledger takes
// each such read, logged by the waiting node, as one more fetch of that
// chunk, and no more.
func TestClusterCreditsReadsAroundASlowOwner(t *testing.T) {
	o := newTestOracle(t)
	blob := o.head("soak/llm").files["blob.bin"]
	var procs []*proxy
	for _, name := range []string{"owner", "waiter"} {
		sink, err := newLogSink(t.TempDir() + "/" + name + ".log")
		if err != nil {
			t.Fatal(err)
		}
		l := newLedger(o.w, o.h, "hub-"+name, "cdn-"+name)
		l.shared = true
		procs = append(procs, &proxy{name: name, sink: sink, ledger: l, up: &upstream{hub: o.h}})
	}
	owner, waiter := procs[0], procs[1]
	fetch := func(p *proxy, rng string, n int64) {
		p.ledger.observe(hubtest.RequestRecord{Method: "GET", Host: p.ledger.cdnHost, Path: "/blobs/" + blob.etag, Status: 206, Range: rng, Bytes: n})
	}
	s := &soak{w: o.w, stats: newStats(), events: newEventLog(time.Now()), procs: &procSet{}}
	// The waiter read the last three blocks of chunk 1 around the owner,
	// which then delivered the whole chunk.
	fetch(waiter, "bytes=327680-524287", 196608)
	fetch(owner, "bytes=262144-524287", 262144)
	if line := s.checkCluster(procs); s.stats.violations() != 1 || line.total.refetch != 196608 {
		t.Fatalf("a read around the owner no line explains: %d violations, %d refetched", s.stats.violations(), line.total.refetch)
	}
	waiter.sink.line(`{"level":"INFO","msg":"` + storeSlowOwnerMsg + `","key":"` + sharedfill.ChunkKey(blob.etag, 262144, 1) + `"}`)
	if ev := waiter.sink.storeEvents(); ev.slow[blob.etag] != 1 || ev.chunks[blob.etag] != 1 || len(ev.other) != 0 {
		t.Fatalf("the line is not a read around a slow owner: slow %v, chunks %v, other %v", ev.slow, ev.chunks, ev.other)
	}
	if s.checkCluster(procs); s.stats.violations() != 1 {
		t.Fatal("a read around a slow owner, logged, is still over the bound")
	}
	if bad, _ := waiter.ledger.check(waiter.sink, clusterTerms(procs)); len(bad) != 0 {
		t.Fatalf("the waiter's own bound: %+v", bad)
	}
	// A second read around the owner of the same chunk, with no line of
	// its own, is not explained by the first one's.
	fetch(waiter, "bytes=262144-524287", 262144)
	if s.checkCluster(procs); s.stats.violations() != 2 {
		t.Fatal("one line explained two reads around the owner")
	}
	// Nor does a line on chunk 1 explain a refetch of chunk 0.
	s.stats = newStats()
	fetch(owner, "bytes=0-262143", 262144)
	fetch(waiter, "bytes=0-262143", 262144)
	waiter.sink.line(`{"level":"INFO","msg":"` + storeSlowOwnerMsg + `","key":"` + sharedfill.ChunkKey(blob.etag, 262144, 1) + `"}`)
	if s.checkCluster(procs); s.stats.violations() != 1 {
		t.Fatalf("a line on chunk 1 and a refetch of chunk 0: %d violations, want 1", s.stats.violations())
	}
}

// The small-disk node's upstream bytes are split by the chunks the store
// held and by whether its breaker kept it off the store.
func TestLedgerChunkBytes(t *testing.T) {
	f := newLedgerFix(t)
	f.fetch(f.blob, 0, chunkSize)                       // chunk 0
	f.fetch(f.blob, chunkSize+ledgerBlock, 2*chunkSize) // most of chunk 1
	f.fetch(f.blob, 2*chunkSize, 2*chunkSize+100)       // a bit of chunk 2
	held := map[int64]bool{1: true, 2: true}
	through, around := f.l.chunkBytes(f.blob.etag, held, func(time.Time) bool { return false })
	if through != 3*ledgerBlock+100 || around != 0 {
		t.Errorf("through the store %d, around it %d; want %d and 0", through, around, 3*ledgerBlock+100)
	}
	through, around = f.l.chunkBytes(f.blob.etag, held, func(time.Time) bool { return true })
	if through != 0 || around != 3*ledgerBlock+100 {
		t.Errorf("all off the store: through %d, around %d", through, around)
	}
	if through, _ := f.l.chunkBytes(f.blob.etag, map[int64]bool{}, func(time.Time) bool { return false }); through != 0 {
		t.Errorf("no chunk held: %d bytes", through)
	}
}

// Whether a proxy served around the store during a read: any stretch off
// it that overlaps the read, an open one included.
func TestStoreDownDuring(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ev := newStoreEvents()
	ev.note(logEntry{Msg: storeDownMsgs[0]}, at(10))
	ev.note(logEntry{Msg: storeUpMsg}, at(12))
	for _, c := range []struct {
		a, b int
		want bool
	}{{0, 9, false}, {0, 10, true}, {11, 11, true}, {12, 20, true}, {13, 20, false}} {
		if got := ev.downDuring(at(c.a), at(c.b)); got != c.want {
			t.Errorf("[%ds, %ds]: %v, want %v", c.a, c.b, got, c.want)
		}
	}
	ev.note(logEntry{Msg: storeDownMsgs[1]}, at(30))
	if !ev.downDuring(at(40), at(50)) {
		t.Error("a stretch still open is not down")
	}
}
