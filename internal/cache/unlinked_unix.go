//go:build unix

package cache

import (
	"os"
	"syscall"
)

// unlinked reports whether an open file's name is gone from the file
// system (its link count is zero), as after an external delete. One fstat:
// far cheaper than reopening the file per request, which is what an idle
// open file saves.
func unlinked(f *os.File) bool {
	info, err := f.Stat()
	if err != nil {
		return true
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
