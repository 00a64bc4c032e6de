//go:build !(cuda && cgo && linux)

package main

import (
	"context"
	"net/http"

	"github.com/hubproxy/hubproxy/internal/gpu"
)

// vmmTimes: see gpucmd_benchvmm_cuda.go. Without cuda the bench stops
// before staging (no driver), so this is never measured.
type vmmTimes struct {
	bytes      int64
	stage, imp float64
}

func benchVMMStage(context.Context, *gpu.Copier, http.Handler, string, string, int) (vmmTimes, error) {
	return vmmTimes{}, errVMMCheckNeedsCUDA
}
