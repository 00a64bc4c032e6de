//go:build linux

package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/gpu"
)

// unixAdmin serves e's admin API on a Unix socket, as admin-listen
// unix://… does, and returns its path.
func unixAdmin(t *testing.T, e *env) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hpadm") // short: socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "admin.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(e.Admin)
	srv.Listener = ln
	srv.Config.ConnContext = admin.ConnContext // the peer's real SO_PEERCRED
	srv.Start()
	t.Cleanup(srv.Close)
	return path
}

// fdConn reads a Unix socket with recvmsg, keeping the file descriptors
// that arrive with the bytes, as a consumer must (a plain read discards
// them).
type fdConn struct {
	*net.UnixConn
	fds []int
}

func (c *fdConn) Read(p []byte) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(p, oob)
	if oobn > 0 {
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			fds, _ := unix.ParseUnixRights(&m)
			c.fds = append(c.fds, fds...)
		}
	}
	if errors.Is(err, io.EOF) {
		err = io.EOF // ReadMsgUnix wraps it; readers expect it bare
	}
	return n, err
}

// stageOnSocket sends a staging request on a new connection to the socket
// and reads the answer with its descriptors; the connection stays open.
func stageOnSocket(t *testing.T, path, body string) (*fdConn, *http.Response, map[string]any) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	fc := &fdConn{UnixConn: c.(*net.UnixConn)}
	t.Cleanup(func() {
		fc.Close()
		for _, fd := range fc.fds {
			unix.Close(fd)
		}
	})
	fmt.Fprintf(fc, "POST /gpu/stage HTTP/1.1\r\nHost: admin\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(fc), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	return fc, resp, out
}

// TestStageHandsOverAFileDescriptor: over the Unix socket the memory's file
// descriptor comes with the answer (SCM_RIGHTS), so the consumer holds a
// reference of its own; nothing needs its PID or a shared PID namespace.
// A held lease lives as long as the connection: no expiry, listed as held,
// and released the moment the consumer closes (or dies). Before, the
// answer was a CUipcMemHandle for memory freed on a timer whatever the
// consumer was doing.
func TestStageHandsOverAFileDescriptor(t *testing.T) {
	st := newFakeStager()
	e, _ := gpuEnv(t, st)
	path := unixAdmin(t, e)
	uuid := "GPU-00000000-0000-0000-0000-000000000001"
	c, resp, out := stageOnSocket(t, path, `{"repo":"org/model","names":["w"],"device":"`+uuid+`","hold":true}`)
	if resp.StatusCode != 200 || out["handover"] != "fd" || out["held"] != true || out["ipc_handle"] != nil ||
		out["expires"] != nil || out["device_uuid"] != uuid || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("answer: %d %v %v", resp.StatusCode, resp.Header, out)
	}
	if len(c.fds) != 1 {
		t.Fatalf("%d descriptors came with the answer, want 1", len(c.fds))
	}
	got := make([]byte, 64)
	n, _ := unix.Pread(c.fds[0], got, 0)
	if id := out["lease"].(string); string(got[:n]) != "fd of "+id {
		t.Fatalf("the descriptor reads %q, want the one of %s", got[:n], id)
	}
	var ls struct{ Leases []map[string]any }
	lr, err := (&http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}).Get("http://admin/gpu/leases")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(lr.Body).Decode(&ls)
	lr.Body.Close()
	if len(ls.Leases) != 1 || ls.Leases[0]["held"] != true || ls.Leases[0]["expires"] != nil {
		t.Errorf("/gpu/leases while held = %v", ls.Leases)
	}
	if st.wasReleased(out["lease"].(string)) {
		t.Fatal("the held lease was released while its connection is open")
	}
	c.Close() // the consumer is done, or dead
	waitReleased(t, st, out["lease"].(string))
}

// TestFDWithoutHoldClosesTheConnection: without hold the descriptor still
// comes with the answer, the connection is closed after it, and the lease
// keeps its TTL (renew or release it).
func TestFDWithoutHoldClosesTheConnection(t *testing.T) {
	st := newFakeStager()
	e, _ := gpuEnv(t, st)
	c, resp, out := stageOnSocket(t, unixAdmin(t, e), `{"repo":"org/model","names":["w"]}`)
	if resp.StatusCode != 200 || out["handover"] != "fd" || out["held"] != false || out["expires"] == nil || len(c.fds) != 1 {
		t.Fatalf("answer: %d %v, %d descriptors", resp.StatusCode, out, len(c.fds))
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
		t.Errorf("after the answer: %d bytes, %v; want the connection closed", n, err)
	}
	if ls := st.Leases(); len(ls) != 1 {
		t.Errorf("leases = %v, want the lease kept until its TTL", ls)
	}
}

// TestHeldIPCLeaseOnTheSocket: a consumer on a device without VMM gets the
// IPC handle, and may still hold its lease by its connection, which is
// what keeps that memory from being freed under it.
func TestHeldIPCLeaseOnTheSocket(t *testing.T) {
	st := newFakeStager()
	st.devs = []gpu.Device{{Index: 0, UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000000", Handover: gpu.HandoverIPC, Health: gpu.HealthOK}}
	e, _ := gpuEnv(t, st)
	c, resp, out := stageOnSocket(t, unixAdmin(t, e), `{"repo":"org/model","names":["w"],"hold":true}`)
	if resp.StatusCode != 200 || out["handover"] != "ipc" || out["ipc_handle"] == nil || out["held"] != true || len(c.fds) != 0 {
		t.Fatalf("answer: %d %v, %d descriptors", resp.StatusCode, out, len(c.fds))
	}
	c.Close()
	waitReleased(t, st, out["lease"].(string))
}

func waitReleased(t *testing.T, st *fakeStager, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !st.wasReleased(id) {
		if time.Now().After(deadline) {
			t.Fatalf("lease %s was not released when its connection closed", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
