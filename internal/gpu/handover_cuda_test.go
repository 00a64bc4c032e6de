//go:build cuda && cgo && linux

package gpu

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/testutil"
)

// The handover through the cgo driver and the C fake: VMM allocation,
// export as a file descriptor, and an importer that keeps its memory.

// TestFDHandoverOutlivesTheLease: the consumer imports the file
// descriptor (cuMemImportFromShareableHandle, a reference of its own), and
// keeps reading the staged bytes after the lease is released and the
// copier closed. Before, the lease was cuMemAlloc memory behind an IPC
// handle, freed under the consumer by Release, the TTL or Close.
func TestFDHandoverOutlivesTheLease(t *testing.T) {
	opts := smallOpts()
	h := newHarness(t, opts, nil)
	h.needFake(t)
	srcs, want := makeSources(rand.New(rand.NewPCG(1, 1)), 30000, 9)
	l := h.stage(t, 0, srcs)
	if l.Handover != HandoverFD {
		t.Fatalf("handover = %v, want fd", l.Handover)
	}
	img := verifyImage(t, h.c, l, want, opts.Alignment)
	slot := h.importLease(t, l)
	if err := h.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, l.Bytes)
	if rc := h.fc.importRead(slot, 0, got); rc != 0 || !bytes.Equal(got, img) {
		t.Fatalf("the import after Release and Close: rc %d, equal %v", rc, bytes.Equal(got, img))
	}
	h.expectLive(t, map[string]int64{"alloc": 0, "phys": 1, "fd": 0}) // the consumer's, until it lets go
	h.fc.importClose(slot)
	h.expectCalls(t, "cuMemHostAlloc", int64(opts.PinnedBuffers))
}

// TestIPCFallbackOwnBlock: without VMM, a lease is cuMemAlloc memory
// rounded up to the granularity, so its IPC handle maps a block holding
// nothing but its own image (zeros after the tensors); a neighbour's bytes
// are out of reach. An importer of a released IPC lease reads garbage:
// that fallback needs the lease held for as long as the memory is used.
func TestIPCFallbackOwnBlock(t *testing.T) {
	opts := smallOpts()
	h := newHarness(t, opts, func(fc *fakeControl) { fc.setNoVMM() })
	h.needFake(t)
	rng := rand.New(rand.NewPCG(2, 2))
	mine, want := makeSources(rng, 5000)
	other, secret := makeSources(rng, 5000)
	a := h.stage(t, 0, mine)
	b := h.stage(t, 0, other)
	if a.Handover != HandoverIPC || a.Bytes != 2<<20 || b.Bytes != 2<<20 {
		t.Fatalf("leases %v of %d and %d bytes", a.Handover, a.Bytes, b.Bytes)
	}
	img := verifyImage(t, h.c, a, want, opts.Alignment)
	slot := h.importLease(t, a)
	defer h.fc.importClose(slot)
	if n := h.fc.importSize(slot); n != a.Bytes {
		t.Errorf("a's handle maps %d bytes, its lease is %d", n, a.Bytes)
	}
	seen := make([]byte, a.Bytes)
	if rc := h.fc.importRead(slot, 0, seen); rc != 0 || !bytes.Equal(seen, img) || bytes.Contains(seen, secret[0][:64]) {
		t.Fatalf("through a's handle: rc %d, own image %v", rc, bytes.Equal(seen, img))
	}
	if err := h.c.Release(a.ID); err != nil {
		t.Fatal(err)
	}
	if rc := h.fc.importRead(slot, 0, seen); rc != 0 || bytes.Equal(seen, img) {
		t.Fatalf("an IPC importer still read the staged bytes after the free (rc %d): the fake missed it", rc)
	}
}

// fakeSysfs writes a sysfs tree that puts the fake's device 0
// (0000:3b:00.0) on NUMA node 0.
func fakeSysfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "bus", "pci", "devices", "0000:3b:00.0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "numa_node"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestNUMAPinnedBuffers: on a device with a known NUMA node the pinned
// buffers are mapped by hubproxy, placed on that node, and registered
// (cuMemHostRegister) rather than allocated by cuMemHostAlloc, which puts
// pages wherever the first touch runs; Close unregisters them.
func TestNUMAPinnedBuffers(t *testing.T) {
	opts := smallOpts()
	opts.sysfs = fakeSysfs(t)
	h := newHarness(t, opts, nil)
	h.needFake(t)
	ds, _ := h.c.Devices()
	if ds[0].NUMANode != 0 {
		t.Fatalf("NUMANode = %d, want 0", ds[0].NUMANode)
	}
	srcs, want := makeSources(rand.New(rand.NewPCG(3, 3)), 30000)
	h.verify(t, h.stage(t, 0, srcs), want)
	h.expectCalls(t, "cuMemHostRegister_v2", int64(opts.PinnedBuffers))
	h.expectCalls(t, "cuMemHostAlloc", 0)
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	h.expectCalls(t, "cuMemHostUnregister", int64(opts.PinnedBuffers))
}

// TestStickyFaultRecovers: an injected 700 kills the context in the C fake
// as on a GPU (every later call in it fails); with ResetOnFault the copier resets the
// primary context, drops the device's leases, re-attaches with fresh
// streams, events and pinned buffers (registered ones unmapped), and
// stages again. The consumer's FD import survives the reset.
func TestStickyFaultRecovers(t *testing.T) {
	opts := resetOpts()
	opts.sysfs = fakeSysfs(t)
	h := newHarness(t, opts, nil)
	h.needFake(t)
	rng := rand.New(rand.NewPCG(4, 4))
	srcs, want := makeSources(rng, 5000)
	l := h.stage(t, 0, srcs)
	slot := h.importLease(t, l)
	defer h.fc.importClose(slot)
	h.fc.fail("cuEventSynchronize", cudaErrorIllegalAddress, 1, 1)
	big, _ := makeSources(rng, 30000)
	_, err := h.c.Stage(context.Background(), 0, big, StageOptions{})
	onlyCode(t, "Stage as the context dies", err, cudaErrorIllegalAddress)
	testutil.Eventually(t, 10*time.Second, "the device to recover", func() bool {
		ds, err := h.c.Devices()
		return err == nil && ds[0].Health == HealthOK && ds[0].Recoveries == 1
	})
	h.expectCalls(t, "cuDevicePrimaryCtxReset_v2", 1)
	h.expectLive(t, map[string]int64{"dead": 0, "ctx": 1, "alloc": 0, "violations": 0})
	if ls := h.c.Leases(); len(ls) != 0 {
		t.Errorf("Leases after the reset = %+v", ls)
	}
	got := make([]byte, len(want[0]))
	if rc := h.fc.importRead(slot, 0, got); rc != 0 || !bytes.Equal(got, want[0]) {
		t.Errorf("the consumer's import after the reset: rc %d", rc)
	}
	srcs, want = makeSources(rng, 30000, 7)
	h.verify(t, h.stage(t, 0, srcs), want)
	h.expectCalls(t, "cuMemHostRegister_v2", 2*int64(opts.PinnedBuffers)) // a fresh pool
}

// TestGPUDirectRDMAFlag: where the device reports GPUDirect RDMA with VMM
// (attribute 110), cuMemCreate gets allocFlags.gpuDirectRDMACapable and the
// lease says so; elsewhere neither, since the driver refuses the flag there.
func TestGPUDirectRDMAFlag(t *testing.T) {
	for _, on := range []bool{true, false} {
		setup := func(fc *fakeControl) {
			if on {
				fc.setRDMA()
			}
		}
		h := newHarness(t, smallOpts(), setup)
		h.needFake(t)
		srcs, want := makeSources(rand.New(rand.NewPCG(5, 5)), 5000)
		l := h.stage(t, 0, srcs)
		ds, _ := h.c.Devices()
		if l.GPUDirectRDMA != on || ds[0].GPUDirectRDMA != on {
			t.Errorf("rdma %v: lease says %v, device %v", on, l.GPUDirectRDMA, ds[0].GPUDirectRDMA)
		}
		h.expectLive(t, map[string]int64{"rdma": map[bool]int64{true: 1, false: 0}[on], "violations": 0})
		h.verify(t, l, want)
		if err := h.c.Release(l.ID); err != nil {
			t.Fatal(err)
		}
	}
}
