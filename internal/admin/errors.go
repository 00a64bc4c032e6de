package admin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/server"
)

// errorRules are the admin listener's own rows of its error table: its
// request errors and the GPU's. Plumbing puts them ahead of the public
// listener's rows, which answer everything else a staging meets (bad tensor
// specs, refused repos, upstream failures while reading a tensor). Being
// first changes no answer: no error of the public rows wraps a GPU one, and
// the GPU's wrap only driver errors and source read errors, which those
// rows answer after the GPU's anyway. Status and code are fixed per rule,
// and checked against api/openapi.yaml (errors_internal_test.go); the
// answer is the error's own text.
var errorRules = []server.ErrorRule{
	{Name: "bad admin request", Match: as[*requestError], Status: http.StatusBadRequest, Code: "BadRequest"},
	{Name: "admin body too large", Match: as[*tooLargeError], Status: http.StatusRequestEntityTooLarge, Code: "BadRequest"},
	{Name: "GPU unavailable", Match: is(gpu.ErrUnavailable), Status: http.StatusServiceUnavailable, Code: "GPUUnavailable"},
	// Before "GPU driver": the error wraps the sticky *gpu.DriverError that
	// killed the device, and the answer is "retry later", not "failed".
	{Name: "GPU device failed", Match: is(gpu.ErrDeviceFailed), Status: http.StatusServiceUnavailable, Code: "GPUDeviceFailed"},
	{Name: "unknown GPU lease", Match: is(gpu.ErrUnknownLease), Status: http.StatusNotFound, Code: "LeaseNotFound"},
	{Name: "bad GPU request", Match: func(err error) bool { return errors.Is(err, gpu.ErrBadDevice) || errors.Is(err, gpu.ErrBadRequest) },
		Status: http.StatusBadRequest, Code: "BadRequest"},
	{Name: "GPU memory", Match: func(err error) bool { return errors.Is(err, gpu.ErrBudget) || errors.Is(err, gpu.ErrOutOfMemory) },
		Status: http.StatusInsufficientStorage, Code: "GPUMemory"},
	{Name: "GPU driver", Match: as[*gpu.DriverError], Status: http.StatusInternalServerError, Code: "GPUDriver"},
}

// as reports whether err holds a *T, for the table's matchers.
func as[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

// requestError is an admin request hubproxy cannot act on (a body that is
// not a staging request, an invalid lease id, a handover this listener
// cannot make): 400, with its text.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

// tooLargeError is a request body over the route's limit: 413.
type tooLargeError struct{ limit int }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("request body larger than %d bytes", e.limit)
}
