//go:build !(cuda && cgo && linux)

package gpu

import "fmt"

// openDriver reports that this build has no CUDA support: the driver is
// only reachable through cgo, behind the cuda build tag, on Linux.
func openDriver(string, string) (driver, error) {
	return nil, fmt.Errorf("%w: built without CUDA support (needs -tags cuda, cgo and linux)", ErrUnavailable)
}
