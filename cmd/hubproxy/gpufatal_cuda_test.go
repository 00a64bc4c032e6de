//go:build cuda && cgo && linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGPUServeExitsAfterAStickyFault: the process-level half of the
// sticky-fault policy. A `hubproxy serve` built with -tags cuda loads the C
// fake driver, told by FAKECUDA_FAIL (read by the fake's cuInit) to fail
// an async copy with 700, CUDA_ERROR_ILLEGAL_ADDRESS, which kills the
// context. A staging through the admin socket hits it; the process must
// then retire the device, drain and exit non-zero, naming the error, so
// that its supervisor starts a new one: CUDA allows no recovery in process.
func TestGPUServeExitsAfterAStickyFault(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "hubproxy-cuda")
	build := exec.Command("go", "build", "-tags", "cuda", "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags cuda: %v\n%s", err, out)
	}
	lib := filepath.Join(tmp, "libfakecuda.so")
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-pthread", "-o", lib, "../../internal/gpu/testdata/fakecuda/fakecuda.c").CombinedOutput(); err != nil {
		t.Fatalf("building the fake driver: %v\n%s", err, out)
	}
	repoDir := filepath.Join(tmp, "models", "org", "model")
	if err := os.MkdirAll(repoDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var tensors []demoTensor
	for i := range 4 {
		data := make([]byte, 1<<20)
		for j := range data {
			data[j] = byte(i + j)
		}
		tensors = append(tensors, demoTensor{name: fmt.Sprintf("t.%d", i), shape: []int64{int64(len(data) / 2)}, data: data})
	}
	if err := os.WriteFile(filepath.Join(repoDir, "model.safetensors"), safetensorsFile(tensors), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(tmp, "admin.sock")
	p := startServe(t, bin, []string{"FAKECUDA_FAIL=cuMemcpyHtoDAsync_v2:700:after:0"},
		"--upstream", "dir:"+filepath.Join(tmp, "models"), "--cache-dir", filepath.Join(tmp, "cache"),
		"--admin-listen", "unix://"+sock, "--gpu-driver-path", lib)

	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	resp, err := client.Post("http://hubproxy/gpu/stage", "application/json",
		strings.NewReader(`{"repo":"org/model","prefix":"t.","device":0,"handover":"ipc"}`))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 500 {
			t.Errorf("the staging that hit the fault answered %d", resp.StatusCode)
		}
	}
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatalf("hubproxy still runs a minute after the sticky fault:\n%s", p.log())
	}
	var exit *exec.ExitError
	if err := p.Err(); !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("hubproxy exited with %v, want a non-zero exit:\n%s", err, p.log())
	}
	log := p.log()
	for _, want := range []string{"CUDA_ERROR_ILLEGAL_ADDRESS", "sticky fault", "device drained after a sticky fault", "shutting down for a restart"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}
