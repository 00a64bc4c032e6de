package soak

import (
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// The cluster bound: a chunk fetched by one proxy and again by another is a
// violation, unless the store's events explain it (here, the file dropped
// after failing verification), and answers a proxy asked for while off the
// store are left out of it.
func TestClusterBound(t *testing.T) {
	o := newTestOracle(t)
	blob := o.head("soak/llm").files["blob.bin"]
	var procs []*proxy
	for _, name := range []string{"p0", "p1"} {
		sink, err := newLogSink(t.TempDir() + "/" + name + ".log")
		if err != nil {
			t.Fatal(err)
		}
		l := newLedger(o.w, o.h, "hub-"+name, "cdn-"+name)
		l.shared = true
		procs = append(procs, &proxy{name: name, sink: sink, ledger: l, up: &upstream{hub: o.h}})
	}
	chunk := hubtest.RequestRecord{Method: "GET", Path: "/blobs/" + blob.etag, Status: 206, Range: "bytes=0-262143", Bytes: 262144}
	fetch := func(p *proxy) {
		rec := chunk
		rec.Host = p.ledger.cdnHost
		p.ledger.observe(rec)
	}
	s := &soak{w: o.w, stats: newStats(), events: newEventLog(time.Now()), procs: &procSet{}}
	fetch(procs[0])
	if s.checkCluster(procs); s.stats.violations() != 0 {
		t.Fatal("one fetch of a chunk in the cluster is over the bound")
	}
	fetch(procs[1])
	if line := s.checkCluster(procs); s.stats.violations() != 1 || line.total.refetch != 262144 {
		t.Fatalf("a second proxy fetching the chunk again: %d violations, %d refetched", s.stats.violations(), line.total.refetch)
	}
	procs[1].sink.line(`{"level":"WARN","msg":"` + storeForgetMsgs[0] + `","etag":"` + blob.etag + `"}`)
	if s.checkCluster(procs); s.stats.violations() != 1 {
		t.Fatal("a drop of the file from the store does not explain its refetch")
	}
	for _, p := range procs { // the fetches so far were a minute ago
		for i := range p.ledger.answers {
			p.ledger.answers[i].at = p.ledger.answers[i].at.Add(-time.Minute)
		}
	}
	procs[0].sink.line(`{"level":"WARN","msg":"` + storeDownMsgs[0] + `"}`)
	fetch(procs[0])
	if line := s.checkCluster(procs); s.stats.violations() != 1 || line.around != 262144 {
		t.Fatalf("a fetch while off the store: %d violations, %d around the store", s.stats.violations(), line.around)
	}
}
