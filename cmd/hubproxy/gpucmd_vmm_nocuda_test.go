//go:build !(cuda && cgo && linux)

package main

import (
	"errors"
	"testing"
)

func TestGPUVMMCheckNeedsACUDABuild(t *testing.T) {
	out, err := runCLI(t, "gpu", "vmmcheck")
	if !errors.Is(err, errVMMCheckNeedsCUDA) {
		t.Fatalf("gpu vmmcheck without cuda: %v\n%s", err, out)
	}
}
