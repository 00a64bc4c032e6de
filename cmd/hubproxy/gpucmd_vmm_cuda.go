//go:build cuda && cgo && linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hubproxy/hubproxy/internal/gpu"
)

// The processes of gpu vmmcheck talk over SOCK_SEQPACKET socketpairs: one
// message per step, a line of words, a descriptor riding along
// (SCM_RIGHTS) where one is handed over, and message boundaries kept so a
// descriptor is never attached to the wrong step.
//
//	parent → importer: "import ID SIZE" + fd   answer "ok" | "fail WHY"
//	parent → importer: "check ID"              answer "ok" | "fail WHY"
//	parent → exporter: "create ID SIZE"        answer "ok" + fd | "fail WHY"
//
// ID names an allocation and seeds its pattern (vmmPattern).
// A child exits when its socket closes (or, the exporter, when killed).

// vmmPeer is one end of a socketpair with a receive deadline.
type vmmPeer struct{ fd int }

func newVMMPeer(fd int, timeout time.Duration) (vmmPeer, error) {
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return vmmPeer{}, err
	}
	return vmmPeer{fd: fd}, nil
}

// send sends msg, and passFD with it unless it is negative.
func (p vmmPeer) send(msg string, passFD int) error {
	var oob []byte
	if passFD >= 0 {
		oob = unix.UnixRights(passFD)
	}
	return unix.Sendmsg(p.fd, []byte(msg), oob, nil, 0)
}

// recv returns the next message and the descriptor that came with it, or
// -1; io.EOF when the other end closed.
func (p vmmPeer) recv() (string, int, error) {
	buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(p.fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return "", -1, errors.New("no answer within --step-timeout")
		}
		if err != nil {
			return "", -1, err
		}
		if n == 0 && oobn == 0 {
			return "", -1, io.EOF
		}
		fd := -1
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if fds, err := unix.ParseUnixRights(&m); err == nil {
					for _, f := range fds {
						if fd < 0 {
							fd = f
						} else {
							unix.Close(f) // one descriptor per step: drop extras
						}
					}
				}
			}
		}
		return string(buf[:n]), fd, nil
	}
}

// ask sends a request and returns the answer's descriptor (or -1): an
// answer other than "ok" is an error naming it.
func (p vmmPeer) ask(msg string, passFD int) (int, error) {
	if err := p.send(msg, passFD); err != nil {
		return -1, err
	}
	ans, fd, err := p.recv()
	if err != nil {
		return -1, err
	}
	if ans != "ok" {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, errors.New(strings.TrimPrefix(ans, "fail "))
	}
	return fd, nil
}

// vmmPattern is the bytes allocation seed holds: distinct per seed, so an
// import that mapped the wrong memory fails too.
func vmmPattern(seed uint64, n int64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 0x766d6d))
	for i := int64(0); i+8 <= n; i += 8 {
		v := r.Uint64()
		for k := range int64(8) {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	return b
}

// verify reads a back and compares it with seed's pattern.
func verifyVMM(p *gpu.VMMProbe, a *gpu.VMMAlloc, seed uint64) error {
	got := make([]byte, a.Size)
	if err := p.Read(a, got); err != nil {
		return err
	}
	want := vmmPattern(seed, a.Size)
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		return fmt.Errorf("byte %d is %#02x, want %#02x", i, got[i], want[i])
	}
	return nil
}

// vmmFact is one line of output.
type vmmFact struct {
	Fact   string         `json:"fact"`
	Pass   bool           `json:"pass"`
	Error  string         `json:"error,omitempty"`
	Values map[string]any `json:"values,omitempty"`
}

type vmmReport struct {
	out    io.Writer
	failed []string
}

func (r *vmmReport) fact(name string, err error, values map[string]any) {
	f := vmmFact{Fact: name, Pass: err == nil, Values: values}
	if err != nil {
		f.Error = err.Error()
		r.failed = append(r.failed, name)
	}
	b, _ := json.Marshal(f)
	fmt.Fprintf(r.out, "%s\n", b)
}

// vmmChild is a re-executed child and the parent's end of its socket.
type vmmChild struct {
	cmd     *exec.Cmd
	peer    vmmPeer
	unwatch func() bool // stops the context watch
	stopped bool
	err     error
}

func startVMMChild(ctx context.Context, o vmmCheckOptions, role string) (*vmmChild, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	theirs := os.NewFile(uintptr(fds[1]), "vmmcheck-child")
	defer theirs.Close()
	cmd := exec.CommandContext(ctx, self, "gpu", "vmmcheck", "--child", role, "--driver-path", o.driverPath,
		"--device", strconv.Itoa(o.device), "--step-timeout", o.step.String())
	cmd.ExtraFiles = []*os.File{theirs} // descriptor 3
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		unix.Close(fds[0])
		return nil, err
	}
	peer, err := newVMMPeer(fds[0], o.step)
	if err != nil {
		unix.Close(fds[0])
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	// A cancelled context ends a wait for an answer at once: the socket's
	// shutdown makes recv return, as the child's exit does.
	unwatch := context.AfterFunc(ctx, func() { _ = unix.Shutdown(fds[0], unix.SHUT_RDWR) })
	return &vmmChild{cmd: cmd, peer: peer, unwatch: unwatch}, nil
}

// stop closes the socket (the child exits on EOF) and waits for it.
// It is safe to call again: the deferred call after an explicit one.
func (c *vmmChild) stop() error {
	if !c.stopped {
		c.stopped = true
		c.unwatch()
		unix.Close(c.peer.fd)
		c.err = c.cmd.Wait()
	}
	return c.err
}

// runVMMCheck is the parent: it reports every fact it could check and
// fails if any failed.
func runVMMCheck(ctx context.Context, out io.Writer, o vmmCheckOptions) error {
	r := &vmmReport{out: out}
	p, err := gpu.OpenVMMProbe(o.driverPath, o.device)
	if err != nil {
		return err
	}
	defer p.Close()
	gmin, grec, err := p.Granularity()
	if err == nil && (gmin <= 0 || grec < gmin || grec%gmin != 0) {
		err = fmt.Errorf("minimum %d and recommended %d are not sizes the one can be a multiple of", gmin, grec)
	}
	r.fact("granularity", err, map[string]any{"minimum": gmin, "recommended": grec})
	if err != nil {
		return fmt.Errorf("vmmcheck: %w", err)
	}
	n := (o.size + gmin - 1) / gmin * gmin

	r.fact(unimportedFD(p, n))

	imp, err := startVMMChild(ctx, o, "importer")
	if err != nil {
		return fmt.Errorf("vmmcheck: starting the importer: %w", err)
	}
	defer imp.stop()

	// (a) and (b): this process exports, the importer imports.
	for _, round := range []struct {
		id    uint64
		fact  string
		after func(a *gpu.VMMAlloc) error
	}{
		{1, "survives_exporter_unmap_release", p.Free},
		{2, "survives_exporter_ctx_reset", func(*gpu.VMMAlloc) error { return p.Reset() }},
	} {
		a, err := p.Create(n)
		if err == nil {
			err = p.Write(a, vmmPattern(round.id, n))
			if err != nil {
				_ = p.Free(a)
			}
		}
		if err != nil {
			r.fact(round.fact, fmt.Errorf("exporter: %w", err), nil)
			continue
		}
		err = handOver(p, a, imp, round.id)
		r.fact(fmt.Sprintf("import_pattern_%d", round.id), err, map[string]any{"bytes": n})
		if err != nil {
			_ = p.Free(a)
			r.fact(round.fact, errors.New("not checked: the import failed"), nil)
			continue
		}
		if err := round.after(a); err != nil {
			r.fact(round.fact, fmt.Errorf("exporter: %w", err), nil)
			continue
		}
		_, err = imp.peer.ask(fmt.Sprintf("check %d", round.id), -1)
		r.fact(round.fact, err, nil)
	}

	// (c): a second child exports, this process relays its descriptor,
	// then kills it.
	r.fact("survives_exporter_sigkill", killedExporter(ctx, o, imp, n, 3), nil)

	r.fact("importer_exit", imp.stop(), nil)
	if len(r.failed) > 0 {
		return fmt.Errorf("vmmcheck: %d facts failed: %s", len(r.failed), strings.Join(r.failed, ", "))
	}
	return nil
}

// handOver exports a and has the importer import and check it.
func handOver(p *gpu.VMMProbe, a *gpu.VMMAlloc, imp *vmmChild, id uint64) error {
	fd, err := p.Export(a)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer unix.Close(fd) // the import is a reference of its own
	_, err = imp.peer.ask(fmt.Sprintf("import %d %d", id, a.Size), fd)
	return err
}

func killedExporter(ctx context.Context, o vmmCheckOptions, imp *vmmChild, n int64, id uint64) error {
	exp, err := startVMMChild(ctx, o, "exporter")
	if err != nil {
		return fmt.Errorf("starting the exporter: %w", err)
	}
	defer exp.stop()
	fd, err := exp.peer.ask(fmt.Sprintf("create %d %d", id, n), -1)
	if err != nil {
		return fmt.Errorf("exporter: %w", err)
	}
	if fd < 0 {
		return errors.New("exporter: no descriptor came")
	}
	_, err = imp.peer.ask(fmt.Sprintf("import %d %d", id, n), fd)
	unix.Close(fd)
	if err != nil {
		return err
	}
	if err := exp.cmd.Process.Signal(unix.SIGKILL); err != nil {
		return err
	}
	_ = exp.stop() // killed: its error says so
	_, err = imp.peer.ask(fmt.Sprintf("check %d", id), -1)
	return err
}

// unimportedFD measures what a descriptor never imported keeps: device
// free memory with the allocation made and exported, after its unmap and
// release with the descriptor still open, and after the close. It fails
// only if the close does not give the memory back (a leak); whether the
// open descriptor held it is reported. cuMemGetInfo is device-wide, so
// other processes' allocations are noise: half the size is the threshold.
func unimportedFD(p *gpu.VMMProbe, n int64) (string, error, map[string]any) {
	const name = "unimported_fd_memory"
	v := map[string]any{"bytes": n}
	free0, err := p.MemFree()
	if err != nil {
		return name, err, v
	}
	a, err := p.Create(n)
	if err != nil {
		return name, err, v
	}
	fd, err := p.Export(a)
	if err != nil {
		_ = p.Free(a)
		return name, err, v
	}
	free1, err1 := p.MemFree()
	err2 := p.Free(a)
	free2, err3 := p.MemFree()
	unix.Close(fd)
	free3, err4 := p.MemFree()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return name, err, v
	}
	v["free_before"], v["free_allocated"], v["free_released_fd_open"], v["free_fd_closed"] = free0, free1, free2, free3
	v["held_while_fd_open"] = free2-free1 < n/2
	if free3-free2 < n/2 && free3-free1 < n/2 {
		return name, fmt.Errorf("closing the descriptor returned %d of %d bytes", free3-free1, n), v
	}
	return name, nil, v
}

// runVMMChild serves the parent on descriptor 3 until it closes.
func runVMMChild(_ context.Context, o vmmCheckOptions) error {
	if o.child != "importer" && o.child != "exporter" {
		return fmt.Errorf("--child %q: want importer or exporter", o.child)
	}
	p, err := gpu.OpenVMMProbe(o.driverPath, o.device)
	if err != nil {
		return err
	}
	defer p.Close()
	// No receive deadline: the parent decides how long a step may take.
	peer := vmmPeer{fd: 3}
	held := map[uint64]*gpu.VMMAlloc{}
	defer func() {
		for _, a := range held {
			_ = p.Free(a)
		}
	}()
	for {
		msg, fd, err := peer.recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		answer, passFD := "ok", -1
		if err := vmmChildStep(p, o.child, msg, fd, held, &passFD); err != nil {
			answer = "fail " + err.Error()
		}
		if fd >= 0 {
			unix.Close(fd)
		}
		err = peer.send(answer, passFD)
		if passFD >= 0 {
			unix.Close(passFD)
		}
		if err != nil {
			return err
		}
	}
}

// vmmChildStep does one request; the exporter's descriptor to send back is
// left in *passFD.
func vmmChildStep(p *gpu.VMMProbe, role, msg string, fd int, held map[uint64]*gpu.VMMAlloc, passFD *int) error {
	w := strings.Fields(msg)
	num := func(i int) uint64 {
		if i >= len(w) {
			return 0
		}
		v, _ := strconv.ParseUint(w[i], 10, 64)
		return v
	}
	switch {
	case role == "importer" && len(w) == 3 && w[0] == "import":
		if fd < 0 {
			return errors.New("no descriptor came")
		}
		a, err := p.Import(fd, int64(num(2)))
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		held[num(1)] = a
		return verifyVMM(p, a, num(1))
	case role == "importer" && len(w) == 2 && w[0] == "check":
		a := held[num(1)]
		if a == nil {
			return fmt.Errorf("no import %d", num(1))
		}
		return verifyVMM(p, a, num(1))
	case role == "exporter" && len(w) == 3 && w[0] == "create":
		a, err := p.Create(int64(num(2)))
		if err != nil {
			return err
		}
		held[num(1)] = a
		if err := p.Write(a, vmmPattern(num(1), a.Size)); err != nil {
			return err
		}
		*passFD, err = p.Export(a)
		return err
	}
	return fmt.Errorf("%s: unknown request %q", role, msg)
}
