package gpu

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestPoolPerDeviceOnItsNUMANode: each device stages through pinned
// buffers of its own, pinned on the host NUMA node closest to it, in its
// own context. Before, one pool, pinned on whichever node and in whichever
// context ran first, served every GPU: on a two-socket host half the
// devices read every buffer across the interconnect.
func TestPoolPerDeviceOnItsNUMANode(t *testing.T) {
	opts := smallOpts()
	r := newRig(t, opts, fakeConfig{devices: 3, numa: []int{1, 0, -1}})
	rng := rand.New(rand.NewPCG(1, 1))
	for dev := range 3 {
		srcs, want := makeSources(rng, 20000)
		r.verify(t, r.stage(t, dev, srcs), want)
	}
	nodes := r.drv.pinnedNodes()
	for dev, node := range []int{1, 0, -1} {
		want := slices.Repeat([]int{node}, opts.PinnedBuffers)
		if got := nodes[dev]; !slices.Equal(got, want) {
			t.Errorf("device %d's pinned buffers asked for nodes %v, want %v", dev, got, want)
		}
	}
}

// TestDefaultsAreMoreSmallerBuffers pins the defaults' shape: more
// buffers in flight per device than the old four, each small enough to be
// read and copied while the others are on the bus.
func TestDefaultsAreMoreSmallerBuffers(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.PinnedBuffers < 8 || o.BufferSize > 16<<20 || o.ReadersPerPiece < 2 {
		t.Errorf("defaults: %d buffers of %d bytes, %d readers each", o.PinnedBuffers, o.BufferSize, o.ReadersPerPiece)
	}
}

// concurrentReader serves data and records how many ReadAt calls overlap.
// Each read waits, up to a bound, for want reads to be in at once, so that
// the test does not depend on the scheduler to see them overlap.
type concurrentReader struct {
	data []byte
	want int

	mu      sync.Mutex
	in, max int
	all     chan struct{}
}

func (c *concurrentReader) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	c.in++
	c.max = max(c.max, c.in)
	if c.in == c.want {
		close(c.all)
	}
	c.mu.Unlock()
	select {
	case <-c.all:
	case <-time.After(2 * time.Second): // a pipeline with fewer readers never gets there
	}
	c.mu.Lock()
	c.in--
	c.mu.Unlock()
	return bytes.NewReader(c.data).ReadAt(p, off)
}

// TestSeveralReadersPerPiece: with one pinned buffer, a piece is still
// read by several concurrent reads, so a lazily filled source has more
// than one request in flight. Before, each buffer was filled by one read
// per source: one buffer meant one read at a time.
func TestSeveralReadersPerPiece(t *testing.T) {
	opts := smallOpts()
	opts.PinnedBuffers, opts.BufferSize, opts.ReadersPerPiece = 1, 4*minReadSize, 4
	r := newRig(t, opts, fakeConfig{})
	data := make([]byte, 2*opts.BufferSize+1000)
	fillRandom(rand.New(rand.NewPCG(2, 2)), data)
	src := &concurrentReader{data: data, want: 4, all: make(chan struct{})}
	l := r.stage(t, 0, []Source{{Name: "w", R: src, Len: int64(len(data))}})
	if src.max != 4 {
		t.Errorf("at most %d reads of one buffer overlapped, want 4", src.max)
	}
	r.verify(t, l, [][]byte{data})
}

// TestBenchPageableTimerCoversTheLastDMA: a pageable cuMemcpyHtoD returns
// before its DMA has finished, so the timer must stop only after the
// device has synchronised. The fake's synchronisation takes a second of
// (bubble) time, standing for the last DMA's tail: the pageable figure
// must include it. Before, the timer stopped when the last call returned,
// with its DMA still in flight.
func TestBenchPageableTimerCoversTheLastDMA(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, smallOpts(), fakeConfig{})
		r.drv.hook("syncDevice", func(int) { time.Sleep(time.Second) })
		res, err := r.c.Bench(context.Background(), 0, 50000)
		if err != nil {
			t.Fatal(err)
		}
		if res.Pageable < time.Second {
			t.Errorf("pageable time %v does not cover the last DMA (1s)", res.Pageable)
		}
		if r.drv.dmaPending(0) {
			t.Error("Bench returned with a DMA in flight")
		}
	})
}
