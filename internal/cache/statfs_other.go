//go:build !linux

package cache

import "errors"

// freeBytes is not implemented here; MinFreeBytes is then ignored.
func freeBytes(string) (int64, error) { return 0, errors.ErrUnsupported }
