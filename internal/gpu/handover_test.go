package gpu

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestConsumerOwnsWhatItImports is the handover an inference server can
// live with: it imports a lease's memory from the file descriptor, and
// keeps reading the staged bytes however the lease ends: released,
// expired (the TTL the old design freed memory on, ten minutes after an
// inference server loaded its weights), or dropped by Close on a hubproxy
// restart. Before, every lease was a cuMemAlloc shared by IPC handle, and
// each of those ends freed the memory under the consumer (see
// TestIPCImportLosesItsBytes for what the consumer then read).
func TestConsumerOwnsWhatItImports(t *testing.T) {
	for _, end := range []string{"release", "expiry", "close"} {
		t.Run(end, func(t *testing.T) {
			r := newRig(t, smallOpts(), fakeConfig{})
			srcs, want := makeSources(rand.New(rand.NewPCG(1, 1)), 30000, 7, 5000)
			l := r.stage(t, 0, srcs)
			if l.Handover != HandoverFD {
				t.Fatalf("default handover on a VMM device = %v, want fd", l.Handover)
			}
			img := verifyImage(t, r.c, l, want, r.c.opts.Alignment)
			imp := r.importLease(t, l)
			defer imp.close()
			switch end {
			case "release":
				if err := r.c.Release(l.ID); err != nil {
					t.Fatal(err)
				}
			case "expiry":
				r.clk.awaitAlarm(t, l.Expires)
				r.clk.advance(r.c.opts.LeaseTTL)
				r.clk.awaitAlarm(t, time.Time{})
			case "close":
				if err := r.c.Close(); err != nil {
					t.Fatal(err)
				}
			}
			r.expectFrees(t, 1) // hubproxy let go of its reference…
			got := make([]byte, l.Bytes)
			if err := imp.read(0, got); err != nil || !bytes.Equal(got, img) {
				t.Fatalf("the consumer's import after the lease ended: %v, equal %v", err, bytes.Equal(got, img))
			}
		})
	}
}

// TestIPCImportLosesItsBytes shows the fake catching what the old design
// did to every consumer, and what the legacy fallback still does: an
// importer of a cuMemAlloc lease's IPC handle takes no reference, so once
// the lease ends the memory is freed under it and it reads garbage.
func TestIPCImportLosesItsBytes(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{noVMM: true})
	srcs, want := makeSources(rand.New(rand.NewPCG(2, 2)), 30000)
	l := r.stage(t, 0, srcs)
	if l.Handover != HandoverIPC {
		t.Fatalf("handover without VMM = %v, want ipc", l.Handover)
	}
	imp := r.importLease(t, l)
	defer imp.close()
	if err := r.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want[0]))
	if err := imp.read(0, got); err != nil || bytes.Equal(got, want[0]) {
		t.Fatalf("an IPC importer still read the staged bytes after the free (%v): the fake missed it", err)
	}
}

// TestHeldLeaseNeverExpires: a held lease (the admin API holds one for as
// long as its consumer's socket is open) has no expiry: the reaper leaves
// it alone however far the clock moves, Renew returns it unchanged, and
// only Release ends it.
func TestHeldLeaseNeverExpires(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	srcs, want := makeSources(rand.New(rand.NewPCG(3, 3)), 5000)
	l, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Held || !l.Expires.IsZero() {
		t.Fatalf("held lease: Held %v, Expires %v", l.Held, l.Expires)
	}
	r.clk.awaitAlarm(t, time.Time{}) // nothing for the reaper to wait for
	r.clk.advance(1000 * r.c.opts.LeaseTTL)
	if ls := r.c.Leases(); len(ls) != 1 || ls[0].ID != l.ID {
		t.Fatalf("Leases after a long time = %+v", ls)
	}
	if got, err := r.c.Renew(l.ID); err != nil || !got.Expires.IsZero() {
		t.Fatalf("Renew of a held lease = %+v, %v", got, err)
	}
	r.verify(t, l, want)
	r.expectFrees(t, 0)
	if err := r.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	r.expectClean(t)
}

// TestHandoverFallsBackToIPC: on a driver without VMM, HandoverAuto gives
// the legacy IPC handover (and Devices says so), HandoverFD is refused as
// a bad request, and ExportFD refuses an IPC lease.
func TestHandoverFallsBackToIPC(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{noVMM: true})
	srcs, want := makeSources(rand.New(rand.NewPCG(4, 4)), 5000)
	if ds, _ := r.c.Devices(); ds[0].Handover != HandoverIPC {
		t.Errorf("Device.Handover = %v, want ipc", ds[0].Handover)
	}
	if _, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{Handover: HandoverFD}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("HandoverFD without VMM: %v, want ErrBadRequest", err)
	}
	l := r.stage(t, 0, srcs)
	r.verify(t, l, want)
	if _, err := r.c.ExportFD(l.ID); !errors.Is(err, ErrBadRequest) {
		t.Errorf("ExportFD of an IPC lease: %v, want ErrBadRequest", err)
	}
	r.expectCount(t, "vmmAlloc", 0)
}

// TestExportFDGivesAFreshDescriptorEachTime: every ExportFD is a new
// descriptor of the same memory, so each process of a consumer (one per
// tensor-parallel rank, say) can import its own; an expired lease exports
// nothing.
func TestExportFDGivesAFreshDescriptorEachTime(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	srcs, want := makeSources(rand.New(rand.NewPCG(5, 5)), 9000)
	l := r.stage(t, 0, srcs)
	a, b := r.importLease(t, l), r.importLease(t, l)
	defer a.close()
	defer b.close()
	ga, gb := make([]byte, len(want[0])), make([]byte, len(want[0]))
	if a.read(0, ga) != nil || b.read(0, gb) != nil || !bytes.Equal(ga, want[0]) || !bytes.Equal(gb, want[0]) {
		t.Fatal("two imports of one lease differ from the staged bytes")
	}
	r.clk.awaitAlarm(t, l.Expires)
	r.clk.advance(r.c.opts.LeaseTTL)
	if _, err := r.c.ExportFD(l.ID); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("ExportFD of an expired lease: %v, want ErrUnknownLease", err)
	}
}
