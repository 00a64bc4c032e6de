package gpu

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
)

// TestIPCLeaseSharesNoBlock: a CUipcMemHandle shares the allocator's whole
// underlying block, so a small lease's handle used to reach its
// neighbours: another lease, possibly of a gated model its consumer was
// never allowed to see. Every lease is now rounded up to the granularity,
// so it has a block of its own, and what its handle maps beyond its
// tensors is zero. Before, two small leases shared a block and the first
// one's importer read the second one's bytes.
func TestIPCLeaseSharesNoBlock(t *testing.T) {
	const g = 1 << 20
	r := newRig(t, smallOpts(), fakeConfig{granularity: g, noVMM: true})
	rng := rand.New(rand.NewPCG(1, 1))
	mine, want := makeSources(rng, 5000, 100)
	gated, secret := makeSources(rng, 5000)
	a := r.stage(t, 0, mine)
	b := r.stage(t, 0, gated)
	if a.Bytes != g || b.Bytes != g {
		t.Errorf("lease sizes %d and %d, want the granularity %d", a.Bytes, b.Bytes, g)
	}
	imp := r.importLease(t, a)
	defer imp.close()
	if imp.size != a.Bytes {
		t.Errorf("a's handle maps %d bytes, its lease is %d", imp.size, a.Bytes)
	}
	seen := make([]byte, imp.size)
	if err := imp.read(0, seen); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(seen, secret[0][:64]) {
		t.Fatal("the neighbour's bytes are visible through a's IPC handle")
	}
	img := verifyImage(t, r.c, a, want, r.c.opts.Alignment)
	if !bytes.Equal(seen, img) {
		t.Error("a's handle maps other bytes than a's own image")
	}
}

// TestLeaseTailIsZero: the allocation is rounded up, and every byte after
// the last tensor (which the consumer maps too) is zeroed rather than left
// as whatever the device memory held, for both handovers.
func TestLeaseTailIsZero(t *testing.T) {
	for _, h := range []Handover{HandoverFD, HandoverIPC} {
		t.Run(h.String(), func(t *testing.T) {
			const g = 256 << 10
			r := newRig(t, smallOpts(), fakeConfig{granularity: g})
			srcs, want := makeSources(rand.New(rand.NewPCG(2, 2)), 10000)
			l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{Handover: h})
			if err != nil {
				t.Fatal(err)
			}
			if l.Bytes != g || l.Handover != h {
				t.Fatalf("lease of %d bytes by %v", l.Bytes, l.Handover)
			}
			r.verify(t, l, want) // checks the tail through the consumer's mapping too
		})
	}
}

// TestGranularityFallbackWithoutVMM: on an IPC-only device the driver may
// refuse cuMemGetAllocationGranularity (it describes VMM allocations);
// attach used to fail on that, so such a device could never stage. It
// now falls back to cuMemAlloc's 2 MiB. With VMM the failure still counts.
func TestGranularityFallbackWithoutVMM(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{noVMM: true})
	r.drv.inject(fakeFault{method: "granularity", dev: anyDevice, times: -1, code: cudaErrorNotSupported})
	srcs, want := makeSources(rand.New(rand.NewPCG(3, 3)), 5000)
	l := r.stage(t, 0, srcs)
	if l.Handover != HandoverIPC || l.Bytes != legacyGranularity {
		t.Fatalf("lease %v of %d bytes, want ipc of %d", l.Handover, l.Bytes, legacyGranularity)
	}
	r.verify(t, l, want)

	v := newRig(t, smallOpts(), fakeConfig{})
	v.drv.inject(fakeFault{method: "granularity", dev: anyDevice, times: -1, code: cudaErrorNotSupported})
	if _, err := v.c.Stage(context.Background(), 0, srcs, StageOptions{}); err == nil {
		t.Fatal("a VMM device whose granularity query fails staged anyway")
	}
}
