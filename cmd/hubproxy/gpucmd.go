package main

import (
	"context"
	"encoding/json"
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

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/bytesize"
	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/server"
)

func newGPUCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "gpu", Short: "GPU staging tools"}
	var (
		device            int
		size, driverPath  string
		tensorMiB, budget int
	)
	bench := &cobra.Command{
		Use:   "bench",
		Short: "Measure host→device copy ceilings and hubproxy's staging from the warm cache",
		Long: `bench measures, on this machine's GPU:
  1. the pinned host→device ceiling (the staging pipeline's pinned buffers and
     async copies, without reads),
  2. a pageable host→device copy (cuMemcpyHtoD from malloc'd memory),
  3. hubproxy staging a synthetic safetensors model of --size from its warm
     cache through POST /gpu/stage (reads from the cache included),
and prints the ratios. It needs a binary built with -tags cuda and a driver.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := bytesize.Parse(size)
			if err != nil {
				return fmt.Errorf("--size: %w", err)
			}
			return runGPUBench(cmd.Context(), cmd.OutOrStdout(), driverPath, device, n, int64(tensorMiB)<<20, int64(budget))
		},
	}
	f := bench.Flags()
	f.IntVar(&device, "device", 0, "GPU index")
	f.StringVar(&size, "size", "1GiB", "bytes to copy in each measurement")
	f.IntVar(&tensorMiB, "tensor-mib", 64, "size of each tensor of the synthetic model, MiB")
	f.StringVar(&driverPath, "driver-path", app.Defaults().GPUDriverPath, "CUDA driver library")
	f.IntVar(&budget, "budget", 0, "device budget in bytes (0 = 90% of the device)")
	cmd.AddCommand(bench)
	return cmd
}

func runGPUBench(ctx context.Context, out io.Writer, driverPath string, device int, size, tensorBytes, budget int64) error {
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
	staged, secs, err := benchStaging(ctx, c, device, size, tensorBytes)
	if err != nil {
		return fmt.Errorf("staging: %w", err)
	}
	stageGBps := float64(staged) / secs / 1e9
	fmt.Fprintf(out, "\n%-44s %10s %10s\n", "measurement", "GB/s", "seconds")
	fmt.Fprintf(out, "%-44s %10.2f %10.3f\n", "pinned host→device (ceiling)", ceil.PinnedGBps, ceil.Pinned.Seconds())
	fmt.Fprintf(out, "%-44s %10.2f %10.3f\n", "pageable host→device", ceil.PageableGBps, ceil.Pageable.Seconds())
	fmt.Fprintf(out, "%-44s %10.2f %10.3f\n", "hubproxy staging from the warm cache", stageGBps, secs)
	fmt.Fprintf(out, "\nstaging / pinned ceiling: %.2f\npinned / pageable: %.2f\nstaging / pageable: %.2f\n",
		stageGBps/ceil.PinnedGBps, ceil.Speedup(), stageGBps/ceil.PageableGBps)
	return nil
}

// benchStaging writes a synthetic model of about size bytes, serves it to an
// in-process hubproxy from a directory, warms its cache, then stages every
// tensor through the admin API and reports the lease's bytes and time.
func benchStaging(ctx context.Context, c *gpu.Copier, device int, size, tensorBytes int64) (int64, float64, error) {
	tmp, err := os.MkdirTemp("", "hubproxy-gpu-bench-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(tmp)
	repoDir := filepath.Join(tmp, "models", "bench", "model")
	if err := os.MkdirAll(repoDir, 0o755); err != nil {
		return 0, 0, err
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
	if err := os.WriteFile(filepath.Join(repoDir, "model.safetensors"), safetensorsFile(tensors), 0o644); err != nil {
		return 0, 0, err
	}
	tensors = nil
	h, err := app.Build(app.Config{Upstream: "dir:" + filepath.Join(tmp, "models"), CacheDir: filepath.Join(tmp, "cache"), Stager: c}, nil)
	if err != nil {
		return 0, 0, err
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
	// Warm the cache: the whole file, so staging reads only local bytes.
	if _, err := do(h.Main, http.MethodGet, "/bench/model/resolve/main/model.safetensors", ""); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	rec, err := do(h.Admin, http.MethodPost, "/gpu/stage", `{"repo":"bench/model","prefix":"t.","device":`+strconv.Itoa(device)+`}`)
	if err != nil {
		return 0, 0, err
	}
	secs := time.Since(start).Seconds()
	var lease server.StageResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &lease); err != nil {
		return 0, 0, err
	}
	c.Release(lease.Lease)
	return lease.Bytes, secs, nil
}
