package admin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/gpu"
)

// Each error a staging can meet is answered by one table: the GPU's own
// rows (the device out of memory is 507 GPUMemory, whatever CUDA numbers it;
// a device failing is 503 GPUDeviceFailed, though it wraps a driver error),
// then the rows shared with the public listener for the tensor source's
// read errors.
func TestStageErrorsAnswerFromOneTable(t *testing.T) {
	st := newFakeStager()
	_, url := gpuEnv(t, st)
	sticky := &gpu.DriverError{Call: "cuEventSynchronize", Code: 700, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"}
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("%w: 1 GiB on device 0", gpu.ErrBudget), http.StatusInsufficientStorage, "GPUMemory"},
		{&gpu.DriverError{Call: "cuMemCreate", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}, http.StatusInsufficientStorage, "GPUMemory"},
		{&gpu.DriverError{Call: "cuMemCreate", Code: 999, Name: "CUDA_ERROR_UNKNOWN"}, http.StatusInternalServerError, "GPUDriver"},
		{fmt.Errorf("%w: device 0: %w", gpu.ErrDeviceFailed, sticky), http.StatusServiceUnavailable, "GPUDeviceFailed"},
		{fmt.Errorf("%w: cuInit", gpu.ErrUnavailable), http.StatusServiceUnavailable, "GPUUnavailable"},
		{gpu.ErrBadRequest, http.StatusBadRequest, "BadRequest"},
		{&gpu.SourceError{Name: "w", Err: fetch.ErrUnavailable}, http.StatusBadGateway, "UpstreamUnavailable"},
		{&gpu.SourceError{Name: "w", Err: io.ErrUnexpectedEOF}, http.StatusBadGateway, "UpstreamCutShort"},
		{errors.Join(&gpu.SourceError{Name: "w", Err: fetch.ErrUnavailable}, sticky), http.StatusInternalServerError, "GPUDriver"},
	} {
		st.mu.Lock()
		st.beforeLease = func(context.Context) error { return tc.err }
		st.mu.Unlock()
		resp, out := postStage(t, url, `{"repo":"org/model","names":["w"],"handover":"ipc"}`)
		if resp.StatusCode != tc.status || resp.Header.Get("X-Error-Code") != tc.code || out["error"] == nil {
			t.Errorf("%v: %d %q %v, want %d %q", tc.err, resp.StatusCode, resp.Header.Get("X-Error-Code"), out, tc.status, tc.code)
		}
	}
}
