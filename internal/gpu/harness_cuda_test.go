//go:build cuda && cgo && linux

package gpu

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// realDriverEnv names a real driver library (e.g. libcuda.so.1) to run the
// tests against instead of the fake; tests that need the fake's counters or
// fault injection skip then.
const realDriverEnv = "HUBPROXY_TEST_CUDA_DRIVER"

// fakeLib is the fake driver TestMain builds; each test loads its own copy.
var fakeLib string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if os.Getenv(importerEnv) != "" {
		return importerChild() // a re-exec'd consumer process (crossproc_cuda_test.go)
	}
	if os.Getenv(realDriverEnv) == "" {
		dir, err := os.MkdirTemp("", "fakecuda")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		fakeLib = filepath.Join(dir, "libfakecuda.so")
		cc := strings.Fields(os.Getenv("CC"))
		if len(cc) == 0 {
			cc = []string{"gcc"}
		}
		args := append(cc[1:], "-shared", "-fPIC", "-O2", "-pthread", "-Wall",
			"-o", fakeLib, filepath.Join("testdata", "fakecuda", "fakecuda.c"))
		if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the fake CUDA driver: %v\n%s", err, out)
			return 1
		}
	}
	return m.Run()
}

// harness is a Copier over a private fake driver (fc) or the real one (fc
// nil). Its cleanup closes the copier and, on the fake, checks that nothing
// leaked and the fake saw no misuse. It is the driverView the scenarios
// (scenarios_test.go) check the C fake, or a real driver, with.
type harness struct {
	c   *Copier
	fc  *fakeControl
	lib string // the fake's library file
}

// newHarness opens a copier. setup configures the fake before Open.
func newHarness(t *testing.T, opts Options, setup func(*fakeControl)) *harness {
	t.Helper()
	if real := os.Getenv(realDriverEnv); real != "" {
		opts.DriverPath = real
		c, err := Open(opts)
		if err != nil || !c.Available() {
			_, why := c.Devices()
			t.Fatalf("Open(%s): %v, %v", real, err, why)
		}
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return &harness{c: c}
	}
	// A fresh file is a fresh library instance (dlopen dedups by inode),
	// so every test gets its own fake state.
	path := filepath.Join(t.TempDir(), "libfakecuda.so")
	lib, err := os.ReadFile(fakeLib)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, lib, 0o755); err != nil {
		t.Fatal(err)
	}
	fc, err := openFakeControl(path)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(fc)
	}
	opts.DriverPath = path
	c, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if !c.Available() {
		_, why := c.Devices()
		t.Fatalf("copier unavailable: %v", why)
	}
	h := &harness{c: c, fc: fc, lib: path}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		h.expectNoLeaks(t)
	})
	return h
}

// needFake skips tests that inspect the fake on a real driver.
func (h *harness) needFake(t *testing.T) {
	t.Helper()
	if h.fc == nil {
		t.Skip("needs the fake driver")
	}
}

func (h *harness) expectLive(t *testing.T, want map[string]int64) {
	t.Helper()
	if h.fc == nil {
		return
	}
	for kind, n := range want {
		if got := h.fc.live(kind); got != n {
			t.Errorf("fake live %s = %d, want %d", kind, got, n)
		}
	}
}

func (h *harness) expectCalls(t *testing.T, name string, want int64) {
	t.Helper()
	if h.fc == nil {
		return
	}
	if got := h.fc.calls(name); got != want {
		t.Errorf("fake calls %s = %d, want %d", name, got, want)
	}
}

// leased returns the device's LeasedBytes.
func (h *harness) leased(t *testing.T, dev int) int64 {
	t.Helper()
	ds, err := h.c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	return ds[dev].LeasedBytes
}

// The driverView methods, beyond stage and leased. They name calls as the
// Go fake's methods (cudaCall maps them to the CUDA entry points the C fake
// counts), and on a real driver (fc nil) check nothing, as expectLive and
// expectCalls do.

// expectClean fails the test if the fake holds device memory, mapped,
// physical or reserved, or saw misuse.
func (h *harness) expectClean(t *testing.T) {
	t.Helper()
	h.expectLive(t, map[string]int64{"alloc": 0, "phys": 0, "resv": 0, "violations": 0})
}

// expectNoLeaks fails the test if the fake holds anything at all, as after
// Close.
func (h *harness) expectNoLeaks(t *testing.T) {
	t.Helper()
	h.expectLive(t, map[string]int64{"alloc": 0, "phys": 0, "resv": 0, "fd": 0, "host": 0, "stream": 0, "event": 0, "ctx": 0, "violations": 0})
}

// expectAllocs and expectFrees count device allocations and frees of
// either kind: VMM (cuMemCreate, cuMemRelease) and legacy (cuMemAlloc_v2,
// cuMemFree_v2).
func (h *harness) expectAllocs(t *testing.T, want int) {
	t.Helper()
	if got := h.count("alloc") + h.count("vmmAlloc"); h.fc != nil && got != want {
		t.Errorf("device allocations = %d, want %d", got, want)
	}
}

func (h *harness) expectFrees(t *testing.T, want int) {
	t.Helper()
	if got := h.count("free") + h.count("vmmFree"); h.fc != nil && got != want {
		t.Errorf("device frees = %d, want %d", got, want)
	}
}

func (h *harness) expectCount(t *testing.T, method string, want int) {
	t.Helper()
	h.expectCalls(t, cudaCall(method), int64(want))
}

// count returns how many calls of method the fake saw, failed ones
// included; 0 on a real driver.
func (h *harness) count(method string) int {
	if h.fc == nil {
		return 0
	}
	return int(h.fc.calls(cudaCall(method)))
}

// pinned returns the pinned buffers live, which only the fake can tell.
func (h *harness) pinned() (int, bool) {
	if h.fc == nil {
		return 0, false
	}
	return int(h.fc.live("host")), true
}

// verify checks a lease against the sources' bytes at the copier's
// alignment; see verifyAligned.
func (h *harness) verify(t *testing.T, l *Lease, want [][]byte) {
	t.Helper()
	h.verifyAligned(t, l, want, h.c.opts.Alignment)
}

// verifyAligned checks a lease against the sources' bytes, placed at align
// (see verifyImage) and, on the fake, reads it through its handover as a
// consumer would.
func (h *harness) verifyAligned(t *testing.T, l *Lease, want [][]byte, align int64) {
	t.Helper()
	img := verifyImage(t, h.c, l, want, align)
	if h.fc != nil {
		slot := h.importLease(t, l)
		defer h.fc.importClose(slot)
		got := make([]byte, l.Bytes)
		if rc := h.fc.importRead(slot, 0, got); rc != 0 || !bytes.Equal(got, img) {
			t.Errorf("reading through the %v handover: rc %d, equal %v", l.Handover, rc, bytes.Equal(got, img))
		}
	}
}

// importLease imports a lease into the fake as a consumer would: by file
// descriptor (ExportFD) or IPC handle. The caller closes the slot.
func (h *harness) importLease(t *testing.T, l *Lease) int {
	t.Helper()
	var slot int
	if l.Handover == HandoverIPC {
		slot = h.fc.importIPC(l.IPCHandle)
	} else {
		f, err := h.c.ExportFD(l.ID)
		if err != nil {
			t.Fatalf("ExportFD: %v", err)
		}
		slot = h.fc.importFD(int(f.Fd()))
		f.Close()
	}
	if slot < 0 {
		t.Fatalf("importing the %v handover: %d", l.Handover, slot)
	}
	return slot
}

// stage stages srcs with the default options, failing the test on an error.
func (h *harness) stage(t *testing.T, dev int, srcs []Source) *Lease {
	t.Helper()
	l, err := h.c.Stage(context.Background(), dev, srcs, StageOptions{})
	if err != nil {
		t.Fatalf("Stage: %v", err)
	}
	return l
}
