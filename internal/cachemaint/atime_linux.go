//go:build linux

package cachemaint

import (
	"io/fs"
	"syscall"
	"time"
)

// accessTime is a file's last access time, from the stat structure.
func accessTime(info fs.FileInfo) (time.Time, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(st.Atim.Unix()), true
}
