package gpu

import (
	"errors"
	"fmt"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrUnavailable means CUDA staging cannot run in this process. The error
	// a call returns wraps it together with the reason: built without the
	// cuda tag, driver library not loadable, or cuInit failing (the latter
	// also wraps the *DriverError).
	ErrUnavailable = errors.New("gpu: CUDA staging unavailable")
	// ErrBudget means a lease would take a device past Options.DeviceBudget.
	ErrBudget = errors.New("gpu: device budget exceeded")
	// ErrUnknownLease means no live lease has the id: it was never issued,
	// or was already released or expired.
	ErrUnknownLease = errors.New("gpu: unknown lease")
	// ErrBadDevice means the device index is not one the driver reports.
	ErrBadDevice = errors.New("gpu: no such device")
	// ErrBadRequest means the arguments are invalid: a source with a nil
	// reader or negative offset or length, nothing to stage, or a read-back
	// range outside the lease.
	ErrBadRequest = errors.New("gpu: invalid request")
	// ErrClosed is returned by every call on a closed Copier.
	ErrClosed = errors.New("gpu: copier closed")
)

// DriverError is a CUDA driver call that returned something other than
// CUDA_SUCCESS.
type DriverError struct {
	Call string // driver entry point, e.g. "cuMemAlloc_v2"
	Code int    // CUresult, e.g. 2
	Name string // cuGetErrorName of Code, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
}

func (e *DriverError) Error() string {
	return fmt.Sprintf("gpu: %s: %s (%d)", e.Call, e.Name, e.Code)
}

// SourceError reports that reading a source failed or came up short while
// staging. Err is the reader's error (io.ErrUnexpectedEOF for a short read).
type SourceError struct {
	Name string // Source.Name
	Off  int64  // offset in the source's reader where the failed read began
	Err  error
}

func (e *SourceError) Error() string {
	return fmt.Sprintf("gpu: reading source %q at %d: %v", e.Name, e.Off, e.Err)
}

func (e *SourceError) Unwrap() error { return e.Err }
