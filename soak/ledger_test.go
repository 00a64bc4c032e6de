package soak

import (
	"testing"

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
