//go:build unix && !linux

package child

import "syscall"

// Only Linux has a parent-death signal; elsewhere a child outlives a
// parent that dies without stopping it.
func sysProcAttr(syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
