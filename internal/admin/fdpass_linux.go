//go:build linux

package admin

import (
	"errors"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// fdPassing says whether this build can pass file descriptors over the
// admin socket (the GPU handover only exists on Linux anyway).
const fdPassing = true

// sendWithFD writes data to c, with f (when not nil) attached to its first
// byte as SCM_RIGHTS: the receiver gets its own descriptor of the same
// file, which it must take with recvmsg (a plain read discards it).
func sendWithFD(c net.Conn, data []byte, f *os.File) error {
	if f == nil {
		_, err := c.Write(data)
		return err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return errors.New("a file descriptor can only be passed over a Unix socket")
	}
	n, _, err := uc.WriteMsgUnix(data, unix.UnixRights(int(f.Fd())), nil)
	if err == nil && n < len(data) {
		_, err = c.Write(data[n:]) // the descriptor went with the first part
	}
	return err
}

// peerCred reads the credentials of the process at the other end of a
// Unix socket, as the kernel saw it connect (SO_PEERCRED): its effective
// uid, and its pid, which is 0 when that process is in a PID namespace this
// one cannot see (the usual case across the containers of a pod). Any other
// connection (TCP) has no credential: the peer is anonymous.
func peerCred(c net.Conn) peer {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peer{}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peer{}
	}
	var cred *unix.Ucred
	cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cerr != nil || err != nil {
		return peer{}
	}
	return peer{known: true, uid: cred.Uid, pid: cred.Pid}
}
