//go:build linux

package admin

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestPeerCredNamesTheConnectingProcess: on the Unix socket the owner of a
// lease is what SO_PEERCRED says of the process that connected (this one
// here: its euid and pid); over TCP there is no credential, so the caller
// is anonymous. ConnContext puts that on every request of the
// connection.
func TestPeerCredNamesTheConnectingProcess(t *testing.T) {
	dir, err := os.MkdirTemp("", "hpcred") // short: socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, network := range []string{"unix", "tcp"} {
		addr := filepath.Join(dir, "s.sock")
		if network == "tcp" {
			addr = "127.0.0.1:0"
		}
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		c, err := net.Dial(network, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		want := peer{}
		if network == "unix" {
			want = peer{known: true, uid: uint32(os.Geteuid()), pid: int32(os.Getpid())}
		}
		if got := peerCred(s); got != want {
			t.Errorf("%s: peerCred = %+v, want %+v", network, got, want)
		}
		ctx := ConnContext(context.Background(), s)
		if got, _ := ctx.Value(peerKey{}).(peer); got != want {
			t.Errorf("%s: ConnContext carries %+v, want %+v", network, got, want)
		}
	}
}
