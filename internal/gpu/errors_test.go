package gpu

import (
	"errors"
	"fmt"
	"testing"
)

// ErrOutOfMemory is how callers recognise the driver's out-of-memory
// answer, wrapped or not, without knowing its CUresult; no other driver
// error, and not the budget's refusal, matches it.
func TestDriverErrorIsOutOfMemory(t *testing.T) {
	oom := &DriverError{Call: "cuMemCreate", Code: cudaErrorOutOfMemory, Name: cudaErrorOutOfMemoryName}
	for _, err := range []error{oom, fmt.Errorf("stage: %w", oom), errors.Join(errors.New("read"), oom)} {
		if !errors.Is(err, ErrOutOfMemory) {
			t.Errorf("%v: not ErrOutOfMemory", err)
		}
	}
	for _, err := range []error{
		&DriverError{Call: "cuMemcpyHtoDAsync_v2", Code: cudaErrorIllegalAddress, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"},
		&DriverError{Call: "cuMemAlloc_v2", Code: cudaErrorInvalidValue, Name: "CUDA_ERROR_INVALID_VALUE"},
		ErrBudget,
		fmt.Errorf("%w: device 0: %w", ErrDeviceFailed, &DriverError{Code: cudaErrorLaunchFailed}),
	} {
		if errors.Is(err, ErrOutOfMemory) {
			t.Errorf("%v: ErrOutOfMemory, want not", err)
		}
	}
}
