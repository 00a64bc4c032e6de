package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// errAdminInUse is an admin socket another process is serving.
var errAdminInUse = errors.New("admin socket in use")

// listenAdmin opens the admin listener: a Unix socket (mode 0660, so a
// consumer in the same pod group can connect) or a loopback TCP address.
// Anything reachable from outside the host is refused (parseAdminListen):
// the admin API spends GPU memory.
func listenAdmin(addr string) (net.Listener, error) {
	a, err := parseAdminListen(addr)
	if err != nil {
		return nil, err
	}
	if a.unixPath != "" {
		return listenAdminUnix(a.unixPath)
	}
	ln, err := net.Listen("tcp", a.tcp)
	if err != nil {
		return nil, fmt.Errorf("admin-listen %q: %w", addr, err)
	}
	return ln, nil
}

// listenAdminUnix binds the admin socket at path. A socket already there is
// either another hubproxy's, which is never taken over (its GPU leases and
// stagings are reached through it), or a stale one a process that died
// left, which is replaced. Which it is, connecting tells: something answers,
// or the kernel refuses (ECONNREFUSED: nothing listens).
//
// Two processes starting in the same instant can still both find the path
// stale; the window is the time between the connect and the bind.
func listenAdminUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("admin-listen unix://%s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("admin-listen unix://%s: the path exists and is not a socket; remove it or choose another path", path)
		}
		c, err := net.DialTimeout("unix", path, 2*time.Second)
		switch {
		case err == nil:
			who := "another process"
			if pid := peerPID(c); pid > 0 {
				who = fmt.Sprintf("another process (pid %d)", pid)
			}
			c.Close()
			return nil, fmt.Errorf("%w: admin socket %s is in use by %s; give this hubproxy another --admin-listen, or --admin-listen \"\" to run without the admin API", errAdminInUse, path, who)
		case errors.Is(err, syscall.ECONNREFUSED):
			// Stale: its process is gone.
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("admin-listen unix://%s: removing the stale socket: %w", path, err)
			}
		default:
			return nil, fmt.Errorf("admin-listen unix://%s: a socket is there and checking whether it is in use failed: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("admin-listen unix://%s: %w", path, err)
	}
	// Close removes the path itself, and only while it is still this
	// socket: net's own unlink would remove whatever is there by then.
	ln.SetUnlinkOnClose(false)
	err = os.Chmod(path, 0o660)
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Lstat(path)
	}
	if err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("admin-listen unix://%s: %w", path, err)
	}
	return &adminUnixListener{UnixListener: ln, path: path, bound: fi}, nil
}

// adminUnixListener is the admin socket; closing it removes its path if the
// path is still the socket bound, and leaves alone one that another
// process bound there since.
type adminUnixListener struct {
	*net.UnixListener
	path  string
	bound os.FileInfo

	once sync.Once
	err  error
}

func (l *adminUnixListener) Close() error {
	l.once.Do(func() {
		l.err = l.UnixListener.Close()
		// The same inode, and the same modification time: a socket
		// bound there since may have been given the freed inode's number.
		if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.bound) && fi.ModTime().Equal(l.bound.ModTime()) {
			os.Remove(l.path)
		}
	})
	return l.err
}
