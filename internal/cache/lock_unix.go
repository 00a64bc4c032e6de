//go:build unix

package cache

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func flock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("%w (%s)", ErrLocked, f.Name())
	}
	return err
}
