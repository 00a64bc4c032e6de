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
	// ErrBudget means a lease would take a device past Options.DeviceBudget,
	// or below Options.DeviceHeadroom of free memory.
	ErrBudget = errors.New("gpu: device budget exceeded")
	// ErrUnknownLease means no live lease has the id: it was never issued,
	// or was already released or expired, or its device was reset.
	ErrUnknownLease = errors.New("gpu: unknown lease")
	// ErrBadDevice means the device index, UUID or PCI bus id is not one
	// the driver reports.
	ErrBadDevice = errors.New("gpu: no such device")
	// ErrBadRequest means the arguments are invalid: a source with a nil
	// reader or negative offset or length, nothing to stage, a read-back
	// range outside the lease, an FD asked of an IPC lease, or HandoverFD
	// on a device without VMM.
	ErrBadRequest = errors.New("gpu: invalid request")
	// ErrDeviceFailed means the device's context died of a sticky fault and
	// is being reset, or could not be brought back yet. The error wraps the
	// fault (a *DriverError).
	ErrDeviceFailed = errors.New("gpu: device failed")
	// ErrClosed is returned by every call on a closed Copier.
	ErrClosed = errors.New("gpu: copier closed")
	// ErrOutOfMemory matches a *DriverError saying the device is out of
	// memory (CUDA_ERROR_OUT_OF_MEMORY), so that callers tell "no room"
	// from "failed" without knowing CUDA's numbers. The budget refusing a
	// lease is ErrBudget, not this: the driver was never asked.
	ErrOutOfMemory = errors.New("gpu: device out of memory")
)

// codeOutOfMemory is the CUresult of CUDA_ERROR_OUT_OF_MEMORY.
const codeOutOfMemory = 2

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

// Is makes errors.Is(err, ErrOutOfMemory) hold for the driver's
// out-of-memory answer.
func (e *DriverError) Is(target error) bool {
	return target == ErrOutOfMemory && e.Code == codeOutOfMemory
}

// Sticky reports whether the code is one CUDA documents as leaving the
// context unusable ("the process must be terminated and relaunched"):
// every later call in it fails the same way.
func (e *DriverError) Sticky() bool {
	switch e.Code {
	case 214, // CUDA_ERROR_ECC_UNCORRECTABLE
		226, // CUDA_ERROR_CONTAINED (Hopper: an error contained to this context)
		700, // CUDA_ERROR_ILLEGAL_ADDRESS
		702, // CUDA_ERROR_LAUNCH_TIMEOUT
		710, // CUDA_ERROR_ASSERT
		714, // CUDA_ERROR_HARDWARE_STACK_ERROR
		715, // CUDA_ERROR_ILLEGAL_INSTRUCTION
		716, // CUDA_ERROR_MISALIGNED_ADDRESS
		717, // CUDA_ERROR_INVALID_ADDRESS_SPACE
		718, // CUDA_ERROR_INVALID_PC
		719, // CUDA_ERROR_LAUNCH_FAILED
		721, // CUDA_ERROR_TENSOR_MEMORY_LEAK
		810, // CUDA_ERROR_MPS_CLIENT_TERMINATED
		911: // CUDA_ERROR_EXTERNAL_DEVICE
		return true
	}
	return false
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
