package gpu

import (
	"errors"
	"testing"
)

// TestStageDriverFailureCleansUp injects a failure (one that leaves the
// context usable, as most do) into each driver call a staging makes, on
// its first or a later call, for both handovers: the error names the CUDA
// call, nothing stays allocated or reserved, the fake sees no misuse, and
// the next Stage works (failedStageCleansUp). Sticky faults, after which
// it cannot, are recovery_test.go's.
func TestStageDriverFailureCleansUp(t *testing.T) {
	for _, tc := range []struct {
		method string
		after  int
		ipc    bool
	}{
		{"attach", 0, false},
		{"granularity", 0, false},
		{"hostAlloc", 0, false},
		{"hostAlloc", 2, false},
		{"memInfo", 0, false},
		{"vmmAlloc", 0, false},
		{"alloc", 0, true},
		{"copyAsync", 0, false},
		{"copyAsync", 3, true},
		{"record", 2, false},
		{"wait", 0, true},
		{"wait", 4, false},
		{"ipcHandle", 0, true},
	} {
		t.Run(tc.method, func(t *testing.T) {
			r := newRig(t, smallOpts(), fakeConfig{noVMM: tc.ipc})
			r.drv.inject(fakeFault{method: tc.method, after: tc.after, code: cudaErrorUnknown})
			failedStageCleansUp(t, r.c, r, cudaCall(tc.method))
		})
	}
}

// TestStageOutOfDeviceMemory: see outOfDeviceMemory.
func TestStageOutOfDeviceMemory(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	r.drv.inject(fakeFault{method: "vmmAlloc", code: cudaErrorOutOfMemory})
	outOfDeviceMemory(t, r.c, r)
}

// TestStageReaderErrorCleansUp: see readerErrorsCleanUp.
func TestStageReaderErrorCleansUp(t *testing.T) {
	readerErrorsCleanUp(t, func(t *testing.T) (*Copier, driverView) {
		r := newRig(t, smallOpts(), fakeConfig{})
		return r.c, r
	})
}

// TestStageCancelCleansUp: see cancelCleansUp.
func TestStageCancelCleansUp(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	cancelCleansUp(t, r.c, r)
}

// TestStageCancelledBeforeAllocating: see cancelledBeforeAllocating.
func TestStageCancelledBeforeAllocating(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	cancelledBeforeAllocating(t, r.c, r)
}

// TestNewCopierUnavailableWhenDeviceQueryFails: a driver that cannot
// describe its devices yields an unavailable copier whose calls say why.
func TestNewCopierUnavailableWhenDeviceQueryFails(t *testing.T) {
	opts, _ := Options{}.withDefaults()
	drv := newFakeDriver(fakeConfig{devices: 2})
	drv.checkAtEnd(t)
	drv.inject(fakeFault{method: "deviceTotal", dev: 1, code: cudaErrorUnknown})
	c := newCopier(opts, drv, newFakeClock())
	if c.Available() {
		t.Fatal("Available() = true")
	}
	_, err := c.Devices()
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("Devices: %v, want ErrUnavailable", err)
	}
	asDriverError(t, err, "cuDeviceTotalMem_v2", cudaErrorUnknown)
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}
