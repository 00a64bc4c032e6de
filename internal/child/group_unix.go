//go:build unix

package child

import "syscall"

// signalGroup sends sig to the process group pgid leads.
func signalGroup(pgid int, sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }
