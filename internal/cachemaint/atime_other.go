//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly

package cachemaint

import (
	"io/fs"
	"time"
)

// accessTime is unknown here; lastAccess falls back to the modification
// time.
func accessTime(fs.FileInfo) (time.Time, bool) { return time.Time{}, false }
