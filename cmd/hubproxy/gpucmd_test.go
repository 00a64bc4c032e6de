package main

import (
	"strings"
	"testing"
)

func TestGPUBenchExplainsWhenCUDAIsUnavailable(t *testing.T) {
	out, err := runCLI(t, "gpu", "bench", "--driver-path", "/nonexistent/libcuda.so.1", "--size", "1MiB")
	if err == nil || !strings.Contains(err.Error(), "CUDA staging unavailable") {
		t.Fatalf("gpu bench without CUDA: %v\n%s", err, out)
	}
}
