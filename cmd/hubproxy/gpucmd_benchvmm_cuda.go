//go:build cuda && cgo && linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/gpu"
)

// vmmTimes is the warm staging through the VMM descriptor handover: the
// request's seconds (staging and the descriptor's trip on the socket), and
// the consumer's import and map of it.
type vmmTimes struct {
	bytes      int64
	stage, imp float64
}

// benchVMMStage stages prefix "t." once more from the warm cache, as a
// consumer on the admin API's Unix socket does: handover "fd", the
// descriptor taken off the answer with recvmsg, imported and mapped in
// this process (gpu.VMMProbe), and every tensor's bytes compared with the
// model file.
func benchVMMStage(ctx context.Context, c *gpu.Copier, h http.Handler, driverPath, model string, device int) (vmmTimes, error) {
	var vt vmmTimes
	dir, err := os.MkdirTemp("", "hpvmm-") // short: a socket path has ~100 bytes
	if err != nil {
		return vt, err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", filepath.Join(dir, "admin.sock"))
	if err != nil {
		return vt, err
	}
	srv := &http.Server{Handler: h, ConnContext: admin.ConnContext}
	go srv.Serve(ln)
	defer srv.Close()

	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", ln.Addr().String())
	if err != nil {
		return vt, err
	}
	fc := &fdConn{UnixConn: conn.(*net.UnixConn)}
	defer fc.closeAll()
	if dl, ok := ctx.Deadline(); ok {
		_ = fc.SetDeadline(dl)
	}
	body := `{"repo":"bench/model","prefix":"t.","handover":"fd","device":` + strconv.Itoa(device) + `}`
	start := time.Now()
	fmt.Fprintf(fc, "POST /gpu/stage HTTP/1.1\r\nHost: admin\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(fc), nil)
	if err != nil {
		return vt, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	vt.stage = time.Since(start).Seconds()
	if err != nil {
		return vt, err
	}
	if resp.StatusCode != http.StatusOK {
		return vt, fmt.Errorf("POST /gpu/stage (fd): %d %s", resp.StatusCode, raw)
	}
	var lease admin.StageResponse
	if err := json.Unmarshal(raw, &lease); err != nil {
		return vt, err
	}
	defer c.Release(lease.Lease)
	if lease.Handover != "fd" || len(fc.fds) != 1 {
		return vt, fmt.Errorf("handover %q with %d descriptors, want fd with 1", lease.Handover, len(fc.fds))
	}

	p, err := gpu.OpenVMMProbe(driverPath, device)
	if err != nil {
		return vt, err
	}
	defer p.Close()
	start = time.Now()
	a, err := p.Import(fc.fds[0], lease.Bytes)
	vt.imp = time.Since(start).Seconds()
	if err != nil {
		return vt, err
	}
	defer p.Free(a)
	got := make([]byte, a.Size)
	if err := p.Read(a, got); err != nil {
		return vt, err
	}
	if err := compareWithModel(model, got, lease.Tensors); err != nil {
		return vt, err
	}
	for _, t := range lease.Tensors {
		vt.bytes += t.Bytes
	}
	return vt, nil
}

// compareWithModel checks each staged tensor's bytes in the allocation
// against its data in the safetensors file.
func compareWithModel(model string, got []byte, tensors []admin.StagedTensor) error {
	file, err := os.ReadFile(model)
	if err != nil {
		return err
	}
	if len(file) < 8 {
		return errors.New("model file: no header")
	}
	n := binary.LittleEndian.Uint64(file)
	if n > uint64(len(file)-8) {
		return errors.New("model file: header past its end")
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(file[8:8+n], &hdr); err != nil {
		return err
	}
	data := file[8+n:]
	for _, t := range tensors {
		var e struct {
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(hdr[t.Name], &e); err != nil {
			return fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		if e.Offsets[1]-e.Offsets[0] != t.Bytes || t.Offset < 0 || t.Offset+t.Bytes > int64(len(got)) {
			return fmt.Errorf("tensor %s: %d bytes at %d, the file has %d", t.Name, t.Bytes, t.Offset, e.Offsets[1]-e.Offsets[0])
		}
		if !bytes.Equal(got[t.Offset:t.Offset+t.Bytes], data[e.Offsets[0]:e.Offsets[1]]) {
			return fmt.Errorf("tensor %s: the imported bytes differ from the file's", t.Name)
		}
	}
	return nil
}

// fdConn reads a Unix socket with recvmsg, keeping the descriptors that
// arrive with the bytes, as a consumer must (a plain read drops them).
type fdConn struct {
	*net.UnixConn
	fds []int
}

func (c *fdConn) Read(p []byte) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(p, oob)
	if oobn > 0 {
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for _, m := range msgs {
				fds, _ := unix.ParseUnixRights(&m)
				c.fds = append(c.fds, fds...)
			}
		}
	}
	if errors.Is(err, io.EOF) {
		err = io.EOF // ReadMsgUnix wraps it; readers expect it bare
	}
	return n, err
}

func (c *fdConn) closeAll() {
	c.Close()
	for _, fd := range c.fds {
		unix.Close(fd)
	}
}
