package gpu

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestStickyFaultRecoversTheDevice: with ResetOnFault, a sticky fault in the middle of a
// staging kills device 0's context, in every call the fake can fail, with
// the codes CUDA documents as sticky. The staging fails with the fault;
// the device's leases are dropped, its context reset and re-attached, and
// it stages again; Devices counts the fault and the recovery. A consumer
// that imported one of its leases by file descriptor keeps its bytes.
// Device 1 never notices. Before, the device stayed attached with a dead
// context: every later staging on it failed with the fault's code until
// hubproxy restarted (the fake's faults were one-shot, so the test that
// said otherwise could not fail).
func TestStickyFaultRecoversTheDevice(t *testing.T) {
	for _, tc := range []struct {
		method string
		after  int
		code   int
	}{
		{"wait", 2, cudaErrorIllegalAddress},
		{"copyAsync", 1, cudaErrorLaunchFailed},
		{"vmmAlloc", 0, cudaErrorECCUncorrectable},
		{"memInfo", 0, cudaErrorIllegalAddress},
		{"record", 0, cudaErrorIllegalAddress},
	} {
		t.Run(tc.method, func(t *testing.T) {
			r := newRig(t, resetOpts(), fakeConfig{devices: 2})
			rng := rand.New(rand.NewPCG(1, uint64(tc.code)))
			srcs, want0 := makeSources(rng, 5000)
			l0 := r.stage(t, 0, srcs)
			imp := r.importLease(t, l0)
			defer imp.close()
			srcs1, want1 := makeSources(rng, 7000)
			l1 := r.stage(t, 1, srcs1)

			r.drv.inject(fakeFault{method: tc.method, dev: 0, after: tc.after, code: tc.code})
			big, _ := makeSources(rng, 30000)
			_, err := r.c.Stage(context.Background(), 0, big, StageOptions{})
			onlyCode(t, "Stage as the device dies", err, tc.code)
			r.awaitRecovery(t, 0)

			ds, err := r.c.Devices()
			if err != nil {
				t.Fatal(err)
			}
			if d := ds[0]; d.Health != HealthOK || d.Faults != 1 || d.Recoveries != 1 || d.LeasedBytes != 0 || d.LastError == "" {
				t.Errorf("device 0 after recovery: %+v", d)
			}
			if d := ds[1]; d.Health != HealthOK || d.Faults != 0 || d.LeasedBytes != l1.Bytes {
				t.Errorf("device 1: %+v", d)
			}
			if err := r.c.Release(l0.ID); !errors.Is(err, ErrUnknownLease) {
				t.Errorf("Release of a lease the reset dropped: %v, want ErrUnknownLease", err)
			}
			if ls := r.c.Leases(); len(ls) != 1 || ls[0].ID != l1.ID {
				t.Errorf("Leases = %+v, want only device 1's", ls)
			}
			got := make([]byte, len(want0[0]))
			if err := imp.read(0, got); err != nil || !bytes.Equal(got, want0[0]) {
				t.Errorf("the consumer's import after the reset: %v, equal %v", err, bytes.Equal(got, want0[0]))
			}
			r.expectCount(t, "reset", 1)
			srcs, want := makeSources(rng, 30000, 17)
			r.verify(t, r.stage(t, 0, srcs), want)
			r.verify(t, l1, want1)
		})
	}
}

// A lease whose release had begun (taken out of the lease table) when a
// sticky fault reset its device is not freed again in the new context: its
// address there may belong to another lease. Before, the late free hit the
// new context (the fake saw a double free) and took its bytes off the new
// leases' count.
func TestReleaseAcrossAResetFreesNothingNew(t *testing.T) {
	r, rng := newRigLeasedOnBoth(t, 9)
	ls := r.c.Leases()
	var l0 *lease
	r.c.mu.Lock()
	for _, pub := range ls {
		if pub.Device == 0 {
			l0 = r.c.leases[pub.ID]
			delete(r.c.leases, pub.ID) // Release's first step, then it is preempted
		}
	}
	r.c.mu.Unlock()
	if l0 == nil {
		t.Fatal("no lease on device 0")
	}
	r.drv.inject(fakeFault{method: "wait", dev: 0, after: 0, code: cudaErrorIllegalAddress})
	big, _ := makeSources(rng, 30000)
	_, err := r.c.Stage(context.Background(), 0, big, StageOptions{})
	onlyCode(t, "Stage as the device dies", err, cudaErrorIllegalAddress)
	r.awaitRecovery(t, 0)
	srcs, want := makeSources(rng, 20000, 5)
	fresh := r.stage(t, 0, srcs)
	if err := r.c.freeLease(l0); err != nil { // Release resumes
		t.Errorf("the late free: %v", err)
	}
	r.verify(t, fresh, want)
	ds, err := r.c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].LeasedBytes != fresh.Bytes {
		t.Errorf("device 0 counts %d leased bytes, want the fresh lease's %d", ds[0].LeasedBytes, fresh.Bytes)
	}
}

// newRigLeasedOnBoth returns a rig over two devices with a lease staged on
// each, so that a fault on device 0 has a lease to drop and a neighbour to
// leave alone, and the random source (seeded with seed) that made them.
// resetOpts are smallOpts with the in-process reset after a sticky fault
// (Options.ResetOnFault), which the tests of this file are about.
func resetOpts() Options {
	o := smallOpts()
	o.ResetOnFault = true
	return o
}

func newRigLeasedOnBoth(t *testing.T, seed uint64) (*rig, *rand.Rand) {
	t.Helper()
	r := newRig(t, resetOpts(), fakeConfig{devices: 2})
	rng := rand.New(rand.NewPCG(seed, seed))
	for dev := range 2 {
		srcs, _ := makeSources(rng, 5000)
		r.stage(t, dev, srcs)
	}
	return r, rng
}

// TestDevicesDuringRecovery holds device 0's reset: meanwhile Devices
// still lists every device, device 0 as recovering with its free memory
// unknown, stagings on it fail fast with ErrDeviceFailed (wrapping the
// fault), and device 1 stages.
func TestDevicesDuringRecovery(t *testing.T) {
	r, rng := newRigLeasedOnBoth(t, 2)
	entered, release := make(chan struct{}), newLatch()
	defer release.open()
	r.drv.hook("reset", holdFirst(entered, release.ch))
	r.drv.inject(fakeFault{method: "vmmAlloc", dev: 0, code: cudaErrorIllegalAddress})
	srcs, _ := makeSources(rng, 5000)
	if _, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{}); err == nil {
		t.Fatal("Stage succeeded through the fault")
	}
	await(t, entered, "the reset")
	ds, err := r.c.Devices()
	if err != nil {
		t.Fatalf("Devices with a device in recovery: %v", err)
	}
	if ds[0].Health != HealthRecovering || ds[0].FreeBytes != -1 || ds[1].FreeBytes <= 0 || ds[1].Health != HealthOK {
		t.Errorf("Devices = %+v, want device 0 recovering and unknown, device 1 known", ds)
	}
	_, err = r.c.Stage(context.Background(), 0, srcs, StageOptions{})
	var de *DriverError
	if !errors.Is(err, ErrDeviceFailed) || !errors.As(err, &de) || de.Code != cudaErrorIllegalAddress {
		t.Errorf("Stage on a recovering device: %v, want ErrDeviceFailed wrapping the fault", err)
	}
	r.stage(t, 1, srcs)
	release.open()
	r.awaitRecovery(t, 0)
	r.stage(t, 0, srcs)
}

// TestFailedRecoveryIsRetried: when the reset itself fails the device is
// HealthFailed and says why; the next staging on it is refused but starts
// another recovery, after which the device stages.
func TestFailedRecoveryIsRetried(t *testing.T) {
	r := newRig(t, resetOpts(), fakeConfig{})
	rng := rand.New(rand.NewPCG(3, 3))
	srcs, want := makeSources(rng, 5000)
	r.stage(t, 0, srcs)
	r.drv.inject(fakeFault{method: "attach", code: cudaErrorUnknown}) // the re-attach after the reset
	r.drv.inject(fakeFault{method: "wait", code: cudaErrorLaunchFailed})
	if _, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{}); err == nil {
		t.Fatal("Stage succeeded through the fault")
	}
	r.awaitRecovery(t, 0)
	ds, _ := r.c.Devices()
	if ds[0].Health != HealthFailed || ds[0].Recoveries != 0 || !bytes.Contains([]byte(ds[0].LastError), []byte("cuDevicePrimaryCtxRetain")) {
		t.Fatalf("after a failed recovery: %+v", ds[0])
	}
	if _, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{}); !errors.Is(err, ErrDeviceFailed) {
		t.Fatalf("Stage on a failed device: %v, want ErrDeviceFailed", err)
	}
	r.awaitRecovery(t, 0)
	r.verify(t, r.stage(t, 0, srcs), want)
	if ds, _ := r.c.Devices(); ds[0].Health != HealthOK || ds[0].Recoveries != 1 || ds[0].Faults != 1 {
		t.Errorf("after the second recovery: %+v", ds[0])
	}
}

// TestStickyFaultInAReadBack: the fault can surface in any call, here a
// read-back; the device recovers all the same and the lease read from is
// gone with the context.
func TestStickyFaultInAReadBack(t *testing.T) {
	r := newRig(t, resetOpts(), fakeConfig{noVMM: true})
	rng := rand.New(rand.NewPCG(4, 4))
	srcs, _ := makeSources(rng, 5000)
	l := r.stage(t, 0, srcs)
	r.drv.inject(fakeFault{method: "copyToHost", code: cudaErrorIllegalAddress})
	err := r.c.ReadBack(context.Background(), l.ID, 0, make([]byte, 10))
	asDriverError(t, err, "cuMemcpyDtoH_v2", cudaErrorIllegalAddress)
	r.awaitRecovery(t, 0)
	if err := r.c.ReadBack(context.Background(), l.ID, 0, make([]byte, 10)); !errors.Is(err, ErrUnknownLease) {
		t.Errorf("ReadBack of a dropped lease: %v, want ErrUnknownLease", err)
	}
	r.stage(t, 0, srcs)
}

// TestCloseDuringAFault: a fault while the copier closes starts no
// recovery; Close reports the dead device's failures and, with its
// detach, leaves nothing behind.
func TestCloseDuringAFault(t *testing.T) {
	r, _ := newRigLeasedOnBoth(t, 5)
	r.drv.inject(fakeFault{method: "syncStream", dev: 0, code: cudaErrorIllegalAddress})
	onlyCode(t, "Close", r.c.Close(), cudaErrorIllegalAddress)
	r.expectCount(t, "reset", 0)
	if ls := r.drv.leaks(); len(ls) != 0 {
		t.Errorf("after Close: %q", ls)
	}
}

// TestFaultAbortsStagingsOnTheDevice: a staging blocked in a slow reader
// (holding the device's only buffer, so none of its own copies can meet
// the fault) on a device that faults meanwhile fails at once with
// ErrDeviceFailed wrapping the fault, instead of waiting for its reader;
// the device recovers once that reader gives its buffer back.
func TestFaultAbortsStagingsOnTheDevice(t *testing.T) {
	opts := resetOpts()
	opts.PinnedBuffers = 1
	r := newRig(t, opts, fakeConfig{})
	g, errc := startBlockedStage(t, context.Background(), r.c, make([]byte, 30000), 10000)
	r.drv.inject(fakeFault{method: "vmmAlloc", code: cudaErrorIllegalAddress})
	srcs, _ := makeSources(rand.New(rand.NewPCG(6, 6)), 5000)
	if _, err := r.c.Stage(context.Background(), 0, srcs, StageOptions{}); err == nil {
		t.Fatal("Stage succeeded through the fault")
	}
	err := await(t, errc, "the blocked staging to be aborted")
	var de *DriverError
	if !errors.Is(err, ErrDeviceFailed) || !errors.As(err, &de) || de.Code != cudaErrorIllegalAddress {
		t.Fatalf("the blocked staging: %v, want ErrDeviceFailed wrapping the fault", err)
	}
	g.open()
	r.awaitRecovery(t, 0)
	r.stage(t, 0, srcs)
}
