//go:build !linux

package admin

import (
	"errors"
	"net"
	"os"
)

// fdPassing is false: the GPU handover (cgo CUDA) only exists on Linux, so
// "auto" means "ipc" and "fd" is refused.
const fdPassing = false

func sendWithFD(c net.Conn, data []byte, f *os.File) error {
	if f != nil {
		return errors.New("passing file descriptors is not supported on this platform")
	}
	_, err := c.Write(data)
	return err
}

// peerCred reads no credential here (the GPU handover is Linux only): every
// admin caller is anonymous.
func peerCred(net.Conn) peer { return peer{} }
