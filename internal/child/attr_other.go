//go:build !unix

package child

import (
	"os"
	"syscall"
)

// Without process groups or a parent-death signal, a child is one process,
// and it outlives a parent that dies without stopping it.
func sysProcAttr(syscall.Signal) *syscall.SysProcAttr { return nil }

// signalGroup can only kill the child itself.
func signalGroup(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	return p.Signal(sig)
}
