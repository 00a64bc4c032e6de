package clustersim

import (
	"math"
	"testing"
	"time"
)

const MiB = 1 << 20

// measured8 is the benchmark's cluster scenario (bench/results/2026-12-01-vm.md,
// scenario 10): 8 nodes on one MinIO, one cold 2 GiB file, 8 MiB chunks, 16
// fills per node, a fake hub capping each connection at 50 MiB/s with 20 ms
// latency, everything on loopback.
func measured8() Params {
	return Params{Nodes: 8, Files: 1, FileSize: 2048 * MiB, ChunkSize: 8 * MiB, Conns: 16,
		HubConnRate: 50 * MiB, HubLatency: 20 * time.Millisecond,
		StoreConnRate: 400 * MiB, StoreLatency: time.Millisecond, FallbackAfter: 3 * time.Second}
}

// The model against the measured 8-node run: upstream bytes 1.000× the
// file, store writes 1.000×, store reads 7.109× (the model: 7×; the excess
// was fills re-reading chunks, which the chunk cache removes), one chunk
// put per chunk. Tolerance 2%.
func TestAgreesWithTheMeasuredEightNodeRun(t *testing.T) {
	p := measured8()
	r, err := Run(p)
	if err != nil {
		t.Fatal(err)
	}
	model := float64(p.Model())
	for _, c := range []struct {
		name          string
		got, measured float64
	}{
		{"upstream bytes / file", float64(r.UpstreamBytes) / model, 1.000},
		{"store writes / file", float64(r.StoreWriteBytes) / model, 1.000},
		{"store reads / file", float64(r.StoreReadBytes) / model, 7.109},
	} {
		if math.Abs(c.got-c.measured)/c.measured > 0.02 {
			t.Errorf("%s: model %.3f, measured %.3f: more than 2%% apart", c.name, c.got, c.measured)
		}
	}
	t.Logf("8 nodes: last node %v, %d GETs, %d PUTs, peak %d GET/s", r.LastNode, r.GETs, r.PUTs, r.PeakGETs)
}

// Conservation: each chunk is fetched upstream once and put once, and every
// other node reads it once, whatever the cluster's size.
func TestEveryChunkOnceUpstream(t *testing.T) {
	for _, nodes := range []int{1, 2, 17} {
		p := measured8()
		p.Nodes, p.FileSize, p.Files = nodes, 100*MiB+3, 3
		r, err := Run(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := p.Model(); r.UpstreamBytes != m || r.StoreWriteBytes != m || r.StoreReadBytes != int64(nodes-1)*m {
			t.Errorf("%d nodes: upstream %d, written %d, read %d bytes of a %d-byte model", nodes, r.UpstreamBytes, r.StoreWriteBytes, r.StoreReadBytes, m)
		}
		if r.LastNode <= 0 || r.FirstNode > r.LastNode {
			t.Errorf("%d nodes: first %v, last %v", nodes, r.FirstNode, r.LastNode)
		}
	}
}

// A prefix's request limit holds: requests over it queue, and the peak
// per second stays at the limit.
func TestPrefixLimitQueues(t *testing.T) {
	p := measured8()
	p.Nodes, p.FileSize, p.GETRate, p.PUTRate = 64, 512*MiB, 500, 300
	limited, err := Run(p)
	if err != nil {
		t.Fatal(err)
	}
	p.GETRate, p.PUTRate = 0, 0
	free, err := Run(p)
	if err != nil {
		t.Fatal(err)
	}
	if limited.PeakGETs > 500 || limited.PeakPUTs > 300 {
		t.Errorf("peaks %d GET/s, %d PUT/s over the limits 500 and 300", limited.PeakGETs, limited.PeakPUTs)
	}
	if free.PeakGETs <= 500 || limited.LastNode <= free.LastNode || limited.Throttled == 0 {
		t.Errorf("a limit that binds must cost time: free peak %d GET/s in %v, limited %v (throttled %v)", free.PeakGETs, free.LastNode, limited.LastNode, limited.Throttled)
	}
	// Spreading the chunks over prefixes lifts the limit.
	p.GETRate, p.PUTRate, p.Shards = 500, 300, 256
	spread, err := Run(p)
	if err != nil {
		t.Fatal(err)
	}
	if spread.LastNode >= limited.LastNode {
		t.Errorf("256 prefixes took %v, one prefix %v", spread.LastNode, limited.LastNode)
	}
}

func TestRefusesIncompleteParams(t *testing.T) {
	if _, err := Run(Params{Nodes: 1}); err == nil {
		t.Fatal("no error for parameters without sizes or rates")
	}
}

// Waits longer than FallbackAfter cost upstream what the readers read
// meanwhile: a store slowed to a crawl by its request limit shows it.
func TestLongWaitsCostUpstream(t *testing.T) {
	p := measured8()
	p.Nodes, p.FileSize, p.GETRate, p.PUTRate = 32, 256*MiB, 50, 50
	r, err := Run(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.LongWaits == 0 || r.FallbackBytes == 0 || r.UpstreamBytes != p.Model()+r.FallbackBytes {
		t.Errorf("%d long waits, %d fallback bytes, upstream %d of a %d-byte model", r.LongWaits, r.FallbackBytes, r.UpstreamBytes, p.Model())
	}
	p.FallbackAfter = 0
	if r, _ := Run(p); r.FallbackBytes != 0 || r.UpstreamBytes != p.Model() {
		t.Errorf("without fallback: %d fallback bytes, upstream %d", r.FallbackBytes, r.UpstreamBytes)
	}
}
