package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/gpu"
)

func newGPUCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "gpu", Short: "GPU staging tools"}
	var (
		device, tensorMiB int
		driverPath        string
		size              int64 = 1 << 30
		budget            int64
	)
	bench := &cobra.Command{
		Use:   "bench",
		Short: "Measure host→device copy ceilings and hubproxy's staging from the warm cache",
		Long: `bench measures, on this machine's GPU:
  1. the pinned host→device ceiling (the staging pipeline's pinned buffers and
     async copies, without reads),
  2. a pageable host→device copy (cuMemcpyHtoD from malloc'd memory),
  3. hubproxy staging a synthetic safetensors model of --size through
     POST /gpu/stage: first with an empty cache (every byte filled from a
     local dir: upstream on its way), then from the warm cache,
and prints the ratios, then checks that no lease and no device memory is
left behind. It needs a binary built with -tags cuda and a driver.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if size <= 0 || tensorMiB <= 0 {
				return errors.New("--size and --tensor-mib must be above 0")
			}
			return runGPUBench(cmd.Context(), cmd.OutOrStdout(), driverPath, device, size, int64(tensorMiB)<<20, budget)
		},
	}
	f := bench.Flags()
	f.IntVar(&device, "device", 0, "GPU index")
	f.Var(&sizeValue{&size}, "size", "bytes to copy in each measurement (1GiB, 512MiB, …)")
	f.IntVar(&tensorMiB, "tensor-mib", 64, "size of each tensor of the synthetic model, MiB")
	f.StringVar(&driverPath, "driver-path", app.Defaults().GPUDriverPath, "CUDA driver library")
	f.Var(&sizeValue{&budget}, "budget", "device budget, as a size (default: 90% of the device)")
	cmd.AddCommand(bench, newVMMCheckCmd())
	return cmd
}

func runGPUBench(ctx context.Context, out io.Writer, driverPath string, device int, size, tensorBytes, budget int64) error {
	stage := func(ctx context.Context, c *gpu.Copier, device int, size, tensorBytes int64) (stagingTimes, error) {
		return benchStaging(ctx, c, driverPath, device, size, tensorBytes)
	}
	return runGPUBenchWith(ctx, out, driverPath, device, size, tensorBytes, budget, stage)
}

// stagingBench is benchStaging's shape; tests pass a failing one to check
// that the ceilings are out before staging runs.
type stagingBench func(ctx context.Context, c *gpu.Copier, device int, size, tensorBytes int64) (stagingTimes, error)

func runGPUBenchWith(ctx context.Context, out io.Writer, driverPath string, device int, size, tensorBytes, budget int64, stage stagingBench) error {
	c, err := gpu.Open(gpu.Options{DriverPath: driverPath, DeviceBudget: budget})
	if err != nil {
		return err
	}
	defer c.Close()
	if !c.Available() {
		_, err := c.Devices()
		return fmt.Errorf("CUDA staging unavailable: %w", err)
	}
	devs, err := c.Devices()
	if err != nil {
		return err
	}
	if device < 0 || device >= len(devs) {
		return fmt.Errorf("no GPU %d (%d found)", device, len(devs))
	}
	fmt.Fprintf(out, "GPU %d: %s, %.1f GiB\n", device, devs[device].Name, float64(devs[device].TotalBytes)/(1<<30))

	ceil, err := c.Bench(ctx, device, size)
	if err != nil {
		return fmt.Errorf("copy ceilings: %w", err)
	}
	// The ceilings are printed before staging starts, so a staging error on
	// a first run still leaves them in the output.
	fmt.Fprintf(out, "\n%-48s %10s %10s\n", "measurement", "GB/s", "seconds")
	fmt.Fprintf(out, "%-48s %10.2f %10.3f\n", "pinned host→device (ceiling)", ceil.PinnedGBps, ceil.Pinned.Seconds())
	fmt.Fprintf(out, "%-48s %10.2f %10.3f\n", "pageable host→device", ceil.PageableGBps, ceil.Pageable.Seconds())
	fmt.Fprintf(out, "pinned / pageable: %.2f\n", ceil.Speedup())
	// The in-process admin API answers through a recorder with no Unix
	// peer, so cold and warm staging hand over by IPC; a third staging then
	// goes over a Unix socket with the VMM descriptor handover.
	fmt.Fprintln(out, "staging handover path: IPC (in-process admin API, no Unix socket peer); then VMM fd over a Unix socket")
	freeBefore := deviceFree(c, device)
	st, err := stage(ctx, c, device, size, tensorBytes)
	if err != nil {
		return fmt.Errorf("staging: %w", err)
	}
	gbps := func(secs float64) float64 { return float64(st.bytes) / secs / 1e9 }
	fmt.Fprintf(out, "%-48s %10.2f %10.3f\n", "hubproxy staging, cold cache (dir: upstream)", gbps(st.cold), st.cold)
	fmt.Fprintf(out, "%-48s %10.2f %10.3f\n", "hubproxy staging from the warm cache", gbps(st.warm), st.warm)
	if st.vmmErr != nil {
		fmt.Fprintf(out, "hubproxy staging, warm, VMM fd handover: failed: %v\n", st.vmmErr)
	} else {
		v := st.vmm
		fmt.Fprintf(out, "%-48s %10.2f %10.3f\n", "hubproxy staging, warm, VMM fd handover", float64(v.bytes)/v.stage/1e9, v.stage)
		fmt.Fprintf(out, "%-48s %10s %10.3f\n", "consumer fd import and map (in process)", "", v.imp)
		fmt.Fprintf(out, "VMM fd / IPC staging: %.2f\n", st.warm/v.stage)
	}
	fmt.Fprintf(out, "\nstaging / pinned ceiling: %.2f\nstaging / pageable: %.2f\n",
		gbps(st.warm)/ceil.PinnedGBps, gbps(st.warm)/ceil.PageableGBps)

	// Nothing may be left behind: no lease, and the device's free memory
	// back where it was before staging (within the driver's own slack).
	leases := len(c.Leases())
	lost := int64(0)
	if freeBefore >= 0 {
		if after := deviceFree(c, device); after >= 0 {
			lost = max(0, freeBefore-after)
		}
	}
	fmt.Fprintf(out, "leases left: %d\ndevice memory not returned: %d bytes\n", leases, lost)
	if leases > 0 || lost > leakSlack {
		return fmt.Errorf("staging left %d leases and %d bytes of device memory behind", leases, lost)
	}
	if st.vmmErr != nil {
		return fmt.Errorf("staging over the VMM fd handover: %w", st.vmmErr)
	}
	return nil
}

// leakSlack is device memory the driver may keep after frees (its own pools,
// the context's growth): less than this is not counted as a leak.
const leakSlack = 64 << 20

// deviceFree is the device's free memory, or -1 if unknown.
func deviceFree(c *gpu.Copier, device int) int64 {
	devs, err := c.Devices()
	if err != nil || device >= len(devs) {
		return -1
	}
	return devs[device].FreeBytes
}

// stagingTimes is what benchStaging measured: the bytes staged each time,
// and the seconds staging took with an empty cache and with a warm one.
type stagingTimes struct {
	bytes      int64
	cold, warm float64
	// vmm is a third, warm staging over the VMM descriptor handover; an
	// error there is reported after the IPC figures, and fails the bench.
	vmm    vmmTimes
	vmmErr error
}

// benchStaging writes a synthetic model of about size bytes and serves it to
// an in-process hubproxy from a directory, then stages every tensor through
// the admin API twice: with the cache empty (cold), then warm.
func benchStaging(ctx context.Context, c *gpu.Copier, driverPath string, device int, size, tensorBytes int64) (stagingTimes, error) {
	tmp, err := os.MkdirTemp("", "hubproxy-gpu-bench-")
	if err != nil {
		return stagingTimes{}, err
	}
	defer os.RemoveAll(tmp)
	repoDir := filepath.Join(tmp, "models", "bench", "model")
	if err := os.MkdirAll(repoDir, 0o755); err != nil {
		return stagingTimes{}, err
	}
	var tensors []demoTensor
	r := rand.New(rand.NewChaCha8([32]byte{7}))
	for i := int64(0); i*tensorBytes < size; i++ {
		data := make([]byte, min(tensorBytes, size-i*tensorBytes)&^1)
		for j := 0; j+8 <= len(data); j += 8 {
			v := r.Uint64()
			for k := range 8 {
				data[j+k] = byte(v >> (8 * k))
			}
		}
		tensors = append(tensors, demoTensor{name: fmt.Sprintf("t.%05d", i), shape: []int64{int64(len(data) / 2)}, data: data})
	}
	model := filepath.Join(repoDir, "model.safetensors")
	if err := os.WriteFile(model, safetensorsFile(tensors), 0o644); err != nil {
		return stagingTimes{}, err
	}
	tensors = nil
	h, err := app.Build(app.Config{Upstream: "dir:" + filepath.Join(tmp, "models"), CacheDir: filepath.Join(tmp, "cache"), Stager: c}, nil)
	if err != nil {
		return stagingTimes{}, err
	}
	defer h.Close()
	do := func(hd http.Handler, method, path, body string) (*httptest.ResponseRecorder, error) {
		req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
		rec := httptest.NewRecorder()
		hd.ServeHTTP(rec, req)
		if rec.Code >= 300 {
			return rec, fmt.Errorf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
		}
		return rec, nil
	}
	stage := func() (int64, float64, error) {
		start := time.Now()
		rec, err := do(h.Admin, http.MethodPost, "/gpu/stage", `{"repo":"bench/model","prefix":"t.","device":`+strconv.Itoa(device)+`}`)
		if err != nil {
			return 0, 0, err
		}
		secs := time.Since(start).Seconds()
		var lease admin.StageResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &lease); err != nil {
			return 0, 0, err
		}
		return lease.Bytes, secs, c.Release(lease.Lease)
	}
	var st stagingTimes
	// Cold: the cache is empty; staging fills it on the way.
	if _, st.cold, err = stage(); err != nil {
		return st, fmt.Errorf("cold: %w", err)
	}
	// Warm: every byte is in the cache now.
	if st.bytes, st.warm, err = stage(); err != nil {
		return st, fmt.Errorf("warm: %w", err)
	}
	st.vmm, st.vmmErr = benchVMMStage(ctx, c, h.Admin, driverPath, model, device)
	return st, nil
}
