package soak

import (
	"fmt"
	"github.com/hubproxy/hubproxy/internal/sharedfill"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

func TestCoverage(t *testing.T) {
	c := coverage{}
	size := int64(3*ledgerBlock + 10)
	for _, sp := range answerSpans(hubtest.RequestRecord{Status: 200}, size) {
		c.add(sp[0], sp[1])
	}
	if n := c.excess(size, 1); n != 0 {
		t.Errorf("one whole fetch: excess %d", n)
	}
	for _, sp := range answerSpans(hubtest.RequestRecord{Status: 206, Range: "bytes=0-9, 65536-65545,-5"}, size) {
		c.add(sp[0], sp[1])
	}
	if n := c.excess(size, 1); n != 25 {
		t.Errorf("three small ranges again: excess %d, want 25", n)
	}
	if n := c.excess(size, 2); n != 0 {
		t.Errorf("in a second life: excess %d", n)
	}
}

func TestWantBytes(t *testing.T) {
	cases := []struct {
		status int
		rng    string
		want   int64
	}{
		{200, "", 1000},
		{200, "bytes=0-9", 1000}, // the range ignored: the whole file
		{206, "bytes=0-9", 10},
		{206, "bytes=990-2000", 10},
		{206, "bytes=100-", 900},
		{206, "bytes=-50", 50},
		{206, "bytes=-5000", 1000},
		{206, "bytes=0-9,20-29", 0}, // multipart: complete whatever came
	}
	for _, c := range cases {
		got, ok := wantBytes(hubtest.RequestRecord{Status: c.status, Range: c.rng}, 1000)
		if !ok || got != c.want {
			t.Errorf("%d %q: %d %v, want %d", c.status, c.rng, got, ok, c.want)
		}
	}
}

// Every route that carries file content is attributed to its blob, and the
// bound holds for one fill per life and fails for a second.
func TestLedgerNamesAndBounds(t *testing.T) {
	o := newTestOracle(t)
	l := newLedger(o.w, o.h, "hub", "cdn")
	c := o.head("soak/llm")
	lfs, reg := c.files["blob.bin"], c.files["config.json"]
	gated := o.head("soak/gated").files["config.json"]
	if b := l.blobFor("/blobs/"+lfs.etag, "X-Hub-File=x"); b != lfs {
		t.Error("CDN object not named")
	}
	if b := l.blobFor("/api/resolve-cache/models/soak/llm/"+c.id+"/config.json", ""); b != reg {
		t.Error("resolve-cache answer not named")
	}
	if b := l.blobFor("/soak/gated/resolve/main/config.json", ""); b != gated {
		t.Error("a restricted repo's own answer not named")
	}
	if b := l.blobFor("/datasets/soak/corpus/resolve/"+o.w.first[hub.MustRepo(hub.Dataset, "soak/corpus")]+"/README.md", ""); b == nil {
		t.Error("a dataset's file not named")
	}

	sink, err := newLogSink(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	rec := hubtest.RequestRecord{Method: "GET", Host: "cdn", Path: "/blobs/" + lfs.etag, Status: 200, Bytes: lfs.size()}
	l.observe(rec)
	rec.Range, rec.Status, rec.Bytes = "bytes=0-99", 206, 50 // cut short: not complete
	l.observe(rec)
	if bad, _ := l.check(sink, nil); len(bad) != 0 {
		t.Fatalf("one fill is over the bound: %+v", bad)
	}
	rec.Range, rec.Status, rec.Bytes = "bytes=0-99", 206, 100
	l.observe(rec)
	if bad, _ := l.check(sink, nil); len(bad) != 1 || bad[0].key != lfs.key || bad[0].refetch != 100 {
		t.Fatalf("a refetch of 100 bytes within one life is not caught: %+v", bad)
	}
	sink.line(`{"level":"DEBUG","msg":"cache: evicted","repo":"soak/llm","etag":"` + lfs.etag + `"}`)
	if bad, _ := l.check(sink, nil); len(bad) != 0 {
		t.Fatalf("an eviction does not explain a refetch: %+v", bad)
	}
}

// ledgerFix is a ledger on the soak's world, and its blob.bin: 768 KiB,
// twelve blocks, three chunks.
type ledgerFix struct {
	testOracle
	l    *ledger
	sink *logSink
	blob *blobFix
	c    *commitFix
}

func newLedgerFix(t *testing.T) ledgerFix {
	t.Helper()
	o := newTestOracle(t)
	sink, err := newLogSink(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	c := o.head("soak/llm")
	return ledgerFix{testOracle: o, l: newLedger(o.w, o.h, "hub", "cdn"), sink: sink, blob: c.files["blob.bin"], c: c}
}

// fetch records a complete answer of [a, b) of blob, as a proxy's fill.
func (f ledgerFix) fetch(b *blobFix, a, e int64) {
	f.l.observe(hubtest.RequestRecord{Method: "GET", Host: "cdn", Path: "/blobs/" + b.etag, Status: 206,
		Range: fmt.Sprintf("bytes=%d-%d", a, e-1), Bytes: e - a})
}

// fill fetches the whole blob chunk by chunk, as hubproxy fills it.
func (f ledgerFix) fill(b *blobFix) {
	for a := int64(0); a < b.size(); a += chunkSize {
		f.fetch(b, a, min(a+chunkSize, b.size()))
	}
}

// unexplained is what the bound leaves unexplained of the file's refetches.
func (f ledgerFix) unexplained(t *testing.T, key string) int64 {
	t.Helper()
	bad, _ := f.l.check(f.sink, nil)
	var n int64
	for _, e := range bad {
		if e.key == key {
			n += e.refetch - e.explained
		}
	}
	return n
}

const blk = ledgerBlock

// Each event explains one refetch of the blocks it touched, never the
// whole file's: an event about one block, then the file read again from
// upstream (a bound that pooled credits per file let that pass, and let a
// few such events pay for the file over and over); and the same event,
// then the one refetch it does explain, passes.
func TestLedgerCreditsPerBlock(t *testing.T) {
	block3 := [2]int64{3 * blk, 4 * blk}
	scenarios := []struct {
		name  string
		event func(f ledgerFix)
		// what the event explains, which a second fetch may then carry
		explains [2]int64
	}{
		{"a read of one block on a full disk", func(f ledgerFix) {
			f.l.diskFull(time.Now())
			q := &op{kind: opRange, repo: f.c.repo, rev: f.c.id, path: "blob.bin", files: []string{"blob.bin"}, rng: [2]int64{3*blk + 10, 3*blk + 99}}
			f.l.opEnded(q, &result{op: q, sent: time.Now(), headers: time.Now(), done: time.Now()})
			f.l.diskFree(time.Now())
		}, block3},
		{"a read of one block while access changed", func(f ledgerFix) {
			f.l.hist = f.hist
			f.hist.change(func() func(*hubState) { return func(st *hubState) { st.gated[f.c.repo] = true } })
			q := &op{kind: opRange, repo: f.c.repo, rev: f.c.id, path: "blob.bin", files: []string{"blob.bin"}, rng: [2]int64{3*blk + 10, 3*blk + 99}}
			f.l.opEnded(q, &result{op: q, sent: time.Now(), headers: time.Now(), done: time.Now()})
		}, block3},
		{"an answer of one block cut in flight", func(f ledgerFix) {
			f.l.relayLost("GET /blobs/"+f.blob.etag+" HTTP/1.1", fmt.Sprintf("bytes=%d-%d", 3*blk, 4*blk-1), 1000, false)
		}, block3},
		{"a fill that failed for space after its first block", func(f ledgerFix) {
			f.sink.line(fmt.Sprintf(`{"level":"WARN","msg":"cache: fill failed","etag":"%s","range":"[%d,%d)","at":%d,"err":"cache: writing to disk: no space left on device"}`,
				f.blob.etag, 2*blk, 6*blk, 3*blk))
		}, [2]int64{3 * blk, 6 * blk}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, n := range []int{1, 3} {
				f := newLedgerFix(t)
				f.fill(f.blob)
				sc.event(f)
				for range n {
					f.fill(f.blob)
				}
				if got := f.unexplained(t, f.blob.key); got == 0 {
					t.Errorf("the whole file fetched again %d times after %s: all explained", n, sc.name)
				}
			}
			f := newLedgerFix(t)
			f.fill(f.blob)
			sc.event(f)
			f.fetch(f.blob, sc.explains[0], sc.explains[1])
			if got := f.unexplained(t, f.blob.key); got != 0 {
				t.Errorf("the one refetch %s explains: %d bytes unexplained", sc.name, got)
			}
			f.fetch(f.blob, sc.explains[0], sc.explains[1])
			if got := f.unexplained(t, f.blob.key); got == 0 {
				t.Errorf("a second refetch after %s: explained", sc.name)
			}
		})
	}
}

// An eviction explains one refetch of the blocks of the life it ended, so
// one eviction cannot pay for the file read again and again.
func TestLedgerOneEvictionOneRefetch(t *testing.T) {
	f := newLedgerFix(t)
	f.fill(f.blob)
	f.sink.line(`{"level":"DEBUG","msg":"cache: evicted","repo":"soak/llm","etag":"` + f.blob.etag + `"}`)
	f.fill(f.blob)
	if got := f.unexplained(t, f.blob.key); got != 0 {
		t.Fatalf("one refetch after an eviction: %d unexplained", got)
	}
	f.fill(f.blob)
	f.fill(f.blob)
	if got := f.unexplained(t, f.blob.key); got != 2*f.blob.size() {
		t.Fatalf("three refetches after one eviction: %d unexplained, want %d", got, 2*f.blob.size())
	}
}

// An eviction of a partial explains a refetch of the blocks it held, not of
// the file: one block fetched and evicted, then the file fetched twice.
func TestLedgerEvictionOfAPartial(t *testing.T) {
	f := newLedgerFix(t)
	f.fetch(f.blob, 3*blk, 4*blk)
	f.sink.line(`{"level":"DEBUG","msg":"cache: evicted","repo":"soak/llm","etag":"` + f.blob.etag + `"}`)
	f.fill(f.blob)
	if got := f.unexplained(t, f.blob.key); got != 0 {
		t.Fatalf("the file after its evicted block: %d unexplained", got)
	}
	f.fill(f.blob)
	if got := f.unexplained(t, f.blob.key); got != f.blob.size() {
		t.Fatalf("the file twice after one block was evicted: %d unexplained, want %d", got, f.blob.size())
	}
}

// A stretch off the shared store is one event: it explains one refetch of
// each block fetched in it, not every answer asked for in it.
func TestLedgerOffStoreStretch(t *testing.T) {
	f := newLedgerFix(t)
	f.l.shared = true
	sh := &sharedTerms{}
	f.fill(f.blob)
	for i := range f.l.answers {
		f.l.answers[i].at = f.l.answers[i].at.Add(-time.Minute)
	}
	f.sink.line(`{"level":"WARN","msg":"` + storeDownMsgs[0] + `"}`)
	f.fill(f.blob)
	if bad, _ := f.l.check(f.sink, sh); len(bad) != 0 {
		t.Fatalf("one refetch off the store: %+v", bad)
	}
	f.fill(f.blob)
	f.fill(f.blob)
	bad, _ := f.l.check(f.sink, sh)
	if len(bad) != 1 || bad[0].refetch-bad[0].explained != 2*f.blob.size() {
		t.Fatalf("the file fetched three times in one stretch off the store: %+v", bad)
	}
}

// A store chunk event explains one refetch of its chunk's blocks.
func TestLedgerStoreChunkEvent(t *testing.T) {
	f := newLedgerFix(t)
	f.l.shared = true
	f.fill(f.blob)
	f.sink.line(`{"level":"WARN","msg":"` + storeChunkMsgs[3] + `","key":"` + sharedfill.ChunkKey(f.blob.etag, 262144, 1) + `"}`)
	f.fetch(f.blob, chunkSize, 2*chunkSize)
	if bad, _ := f.l.check(f.sink, clusterTerms([]*proxy{{sink: f.sink}})); len(bad) != 0 {
		t.Fatalf("the chunk a store event names, fetched again: %+v", bad)
	}
	f.fill(f.blob)
	bad, _ := f.l.check(f.sink, clusterTerms([]*proxy{{sink: f.sink}}))
	if len(bad) != 1 || bad[0].refetch-bad[0].explained != f.blob.size() {
		t.Fatalf("the whole file after a chunk's store event: %+v", bad)
	}
}

// Spoiling faults: a WrongContentRange may have spoiled any one answer of
// the file, so it explains one refetch of as many blocks as its largest
// answer carried (a chunk), not of the file; a 200 to a ranged request
// (IgnoreRange) explains itself, as often as the fault fired.
func TestLedgerSpoilingFaults(t *testing.T) {
	f := newLedgerFix(t)
	// Fire the fault once at the hub, on blob.bin's own key.
	f.h.SetFaults(hubtest.Faults{WrongContentRange: hubtest.Fault{N: 1}})
	u := f.h.FileURL(f.c.repo, f.c.id, "blob.bin")
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Range", "bytes=0-99")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if f.h.FaultCountsByPath()["WrongContentRange"][f.blob.key] != 1 {
		t.Fatalf("the fault did not fire on %s: %v", f.blob.key, f.h.FaultCountsByPath())
	}
	f.fill(f.blob)
	f.fetch(f.blob, chunkSize, 2*chunkSize)
	if got := f.unexplained(t, f.blob.key); got != 0 {
		t.Fatalf("one chunk fetched again after a spoiling fault: %d unexplained", got)
	}
	f.fill(f.blob)
	if got := f.unexplained(t, f.blob.key); got != f.blob.size() {
		t.Fatalf("the whole file again after one spoiling fault: %d unexplained, want %d", got, f.blob.size())
	}

	g := newLedgerFix(t)
	g.fill(g.blob)
	ignored := hubtest.RequestRecord{Method: "GET", Host: "cdn", Path: "/blobs/" + g.blob.etag, Status: 200, Range: "bytes=0-99", Bytes: g.blob.size()}
	g.l.observe(ignored)
	if got := g.unexplained(t, g.blob.key); got != g.blob.size() {
		t.Fatalf("a 200 to a Range with no IgnoreRange fault: %d unexplained", got)
	}
	g.h.SetFaults(hubtest.Faults{IgnoreRange: hubtest.Fault{N: 1}})
	req, _ = http.NewRequest("GET", g.h.FileURL(g.c.repo, g.c.id, "blob.bin"), nil)
	req.Header.Set("Range", "bytes=0-99")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := g.unexplained(t, g.blob.key); got != 0 {
		t.Fatalf("a 200 to a Range the IgnoreRange fault explains: %d unexplained", got)
	}
	g.l.observe(ignored)
	if got := g.unexplained(t, g.blob.key); got != g.blob.size() {
		t.Fatalf("a second 200 to a Range, the fault fired once: %d unexplained", got)
	}
}
