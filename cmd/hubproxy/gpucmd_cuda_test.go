//go:build cuda && cgo && linux

package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/gpu"
)

// TestGPUBenchAgainstTheFakeDriver runs the whole bench (ceilings, then a
// synthetic model staged from a warm cache through the admin API) against
// the C fake driver the gpu package tests use, loaded like the real one.
func TestGPUBenchAgainstTheFakeDriver(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libfakecuda.so")
	out, err := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-o", lib, "../../internal/gpu/testdata/fakecuda/fakecuda.c", "-lpthread").CombinedOutput()
	if err != nil {
		t.Fatalf("building the fake driver: %v\n%s", err, out)
	}
	var buf bytes.Buffer
	if err := runGPUBench(context.Background(), &buf, lib, 0, 16<<20, 4<<20, 0); err != nil {
		t.Fatalf("gpu bench: %v\n%s", err, buf.String())
	}
	for _, want := range []string{"pinned host→device", "pageable host→device", "hubproxy staging, cold cache", "hubproxy staging from the warm cache", "hubproxy staging, warm, VMM fd handover ", "consumer fd import and map", "VMM fd / IPC staging:", "staging / pinned ceiling", "leases left: 0"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, buf.String())
		}
	}
}

// TestGPUBenchPrintsCeilingsBeforeAStagingError: a first run on a real GPU
// whose staging fails must still leave the ceilings in its output.
func TestGPUBenchPrintsCeilingsBeforeAStagingError(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libfakecuda.so")
	out, err := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-o", lib, "../../internal/gpu/testdata/fakecuda/fakecuda.c", "-lpthread").CombinedOutput()
	if err != nil {
		t.Fatalf("building the fake driver: %v\n%s", err, out)
	}
	boom := errors.New("staging broke")
	failing := func(context.Context, *gpu.Copier, int, int64, int64) (stagingTimes, error) {
		return stagingTimes{}, boom
	}
	var buf bytes.Buffer
	err = runGPUBenchWith(context.Background(), &buf, lib, 0, 16<<20, 4<<20, 0, failing)
	if !errors.Is(err, boom) {
		t.Fatalf("gpu bench with a failing staging: %v, want %v", err, boom)
	}
	for _, want := range []string{"pinned host→device (ceiling)", "pageable host→device", "pinned / pageable:", "staging handover path: IPC"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("output lacks %q after a staging error:\n%s", want, buf.String())
		}
	}
}

// TestGPUBenchReportsAFailedVMMHandover: the VMM fd staging comes after
// the IPC figures; a consumer whose import fails (FAKECUDA_FAIL, read by
// the fake's cuInit) leaves them printed, says the VMM path failed, and
// fails the bench, with no lease left.
func TestGPUBenchReportsAFailedVMMHandover(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libfakecuda.so")
	out, err := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-o", lib, "../../internal/gpu/testdata/fakecuda/fakecuda.c", "-lpthread").CombinedOutput()
	if err != nil {
		t.Fatalf("building the fake driver: %v\n%s", err, out)
	}
	t.Setenv("FAKECUDA_FAIL", "cuMemImportFromShareableHandle:1")
	var buf bytes.Buffer
	err = runGPUBench(context.Background(), &buf, lib, 0, 16<<20, 4<<20, 0)
	if err == nil || !strings.Contains(err.Error(), "VMM fd handover") || !strings.Contains(err.Error(), "cuMemImportFromShareableHandle") {
		t.Fatalf("gpu bench with a failing import: %v\n%s", err, buf.String())
	}
	for _, want := range []string{"hubproxy staging from the warm cache", "hubproxy staging, warm, VMM fd handover: failed:", "leases left: 0"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, buf.String())
		}
	}
}
