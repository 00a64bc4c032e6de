package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// answers reports whether something accepts connections on the socket.
func answers(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// staleSocket leaves a socket file at path that nothing listens on, as a
// process killed with SIGKILL does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
}

func TestAdminSocketInUseIsRefused(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "admin.sock")
	first, err := listenAdmin("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	go func() { // answer, as the admin server does
		for {
			c, err := first.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	second, err := listenAdmin("unix://" + sock)
	if err == nil {
		second.Close()
		t.Fatal("a second listener took over the socket in use")
	}
	want := "admin socket " + sock + " is in use by another process"
	if runtime.GOOS == "linux" {
		want += fmt.Sprintf(" (pid %d)", os.Getpid())
	}
	if !errors.Is(err, errAdminInUse) || !strings.Contains(err.Error(), want) {
		t.Errorf("second listener: %v, want %q", err, want)
	}
	if !answers(sock) {
		t.Error("the first listener's socket was disturbed")
	}
}

func TestStaleAdminSocketIsReplaced(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "admin.sock")
	staleSocket(t, sock)
	ln, err := listenAdmin("unix://" + sock)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	if !answers(sock) {
		t.Error("the new socket does not answer")
	}
	ln.Close()
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("closing left the socket: %v", err)
	}
}

// Closing removes the socket only while it is the one bound: a socket
// another process bound at the path since is left alone.
func TestAdminSocketRemovedOnlyIfOurs(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "admin.sock")
	ours, err := listenAdmin("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(sock) // another process replaced it (an older hubproxy would)
	// Later than file timestamps' granularity (a jiffy), as any real
	// replacement is: the freed inode number may be reused, the time not.
	time.Sleep(20 * time.Millisecond)
	theirs, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	ours.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("closing ours removed theirs: %v", err)
	}
	go func() {
		if c, err := theirs.Accept(); err == nil {
			c.Close()
		}
	}()
	if !answers(sock) {
		t.Error("their socket no longer answers")
	}
}

func TestAdminListenRefusesANonSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.sock")
	os.WriteFile(path, []byte("keep me"), 0o644)
	if ln, err := listenAdmin("unix://" + path); err == nil || !strings.Contains(err.Error(), "not a socket") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("listenAdmin over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "keep me" {
		t.Error("the file was touched")
	}
}
