//go:build cuda && cgo && linux

package gpu

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The VMM handover across processes, as in production: the exporter
// (this test, a Copier over the C fake) sends the lease's descriptor over
// a socketpair (SCM_RIGHTS) to a consumer in another process (this test
// binary re-executed, loading its own instance of the fake), which imports
// it from the memfd the fake keeps the memory in and checks the bytes.

// importerEnv makes the test binary the consumer process; its value is
// the fake library to load, and the socket is its descriptor 3.
const importerEnv = "HUBPROXY_TEST_VMM_IMPORTER"

// importerModeEnv: "early" imports as soon as the descriptor arrives;
// "late" holds the descriptor unimported until the exporter has released
// and closed everything, then imports.
const importerModeEnv = "HUBPROXY_TEST_VMM_IMPORTER_MODE"

// importerChild is the consumer. Protocol, one line each way per step:
// it receives "<sha256> <bytes>" with the descriptor, answers "ready"
// (imported, or holding the descriptor), waits for "read", then imports
// if it had not, reads every byte and answers "ok" or what went wrong.
func importerChild() int {
	fc, err := openFakeControl(os.Getenv(importerEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sock := os.NewFile(3, "sock")
	buf, oob := make([]byte, 256), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(3, buf, oob, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recvmsg:", err)
		return 2
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		fmt.Fprintln(os.Stderr, "no descriptor came:", err)
		return 2
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		fmt.Fprintln(os.Stderr, "no descriptor came:", err)
		return 2
	}
	var want string
	var size int64
	fmt.Sscanf(string(buf[:n]), "%s %d", &want, &size)
	slot := -1
	imp := func() bool {
		slot = fc.importFD(fds[0])
		unix.Close(fds[0]) // the import is a reference of its own
		return slot >= 0
	}
	early := os.Getenv(importerModeEnv) == "early"
	if early && !imp() {
		fmt.Fprintf(sock, "import failed\n")
		return 1
	}
	fmt.Fprintf(sock, "ready\n")
	line, _ := bufio.NewReader(sock).ReadString('\n')
	if line != "read\n" {
		return 2
	}
	if !early && !imp() {
		fmt.Fprintf(sock, "import after the exporter let go failed\n")
		return 1
	}
	got := make([]byte, size)
	if rc := fc.importRead(slot, 0, got); rc != 0 {
		fmt.Fprintf(sock, "read failed: %d\n", rc)
		return 1
	}
	sum := sha256.Sum256(got)
	if hex.EncodeToString(sum[:]) != want {
		fmt.Fprintf(sock, "bytes differ from the staged image\n")
		return 1
	}
	fc.importClose(slot)
	fmt.Fprintf(sock, "ok\n")
	return 0
}

// TestFDHandoverToAnotherProcess: the consumer process reads the staged
// bytes after the exporter released the lease (unmap, cuMemRelease) and
// closed its copier (context gone): whether it imported at once, or only
// held the descriptor until then, which the driver documents as keeping
// the allocation alive. The exporter's memory stays allocated exactly as
// long as the consumer holds the descriptor or its import.
func TestFDHandoverToAnotherProcess(t *testing.T) {
	for _, mode := range []string{"early", "late"} {
		t.Run(mode, func(t *testing.T) {
			opts := smallOpts()
			h := newHarness(t, opts, nil)
			h.needFake(t)
			srcs, want := makeSources(rand.New(rand.NewPCG(11, 11)), 30000, 4097)
			l := h.stage(t, 0, srcs)
			if l.Handover != HandoverFD {
				t.Fatalf("handover %v", l.Handover)
			}
			img := verifyImage(t, h.c, l, want, opts.Alignment)
			sum := sha256.Sum256(img)

			pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			mine, theirs := os.NewFile(uintptr(pair[0]), "exporter"), os.NewFile(uintptr(pair[1]), "importer")
			defer mine.Close()
			var stderr bytes.Buffer
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), importerEnv+"="+h.lib, importerModeEnv+"="+mode)
			cmd.ExtraFiles = []*os.File{theirs}
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			theirs.Close()
			defer cmd.Process.Kill()

			f, err := h.c.ExportFD(l.ID)
			if err != nil {
				t.Fatal(err)
			}
			msg := fmt.Sprintf("%s %d", hex.EncodeToString(sum[:]), l.Bytes)
			err = unix.Sendmsg(pair[0], []byte(msg), unix.UnixRights(int(f.Fd())), nil, 0)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			rd := bufio.NewReader(mine)
			if line, _ := rd.ReadString('\n'); line != "ready\n" {
				t.Fatalf("the consumer: %q; stderr: %s", line, stderr.String())
			}
			if err := h.c.Release(l.ID); err != nil {
				t.Fatal(err)
			}
			if err := h.c.Close(); err != nil {
				t.Fatal(err)
			}
			// Released, unmapped, the context gone: only the other
			// process's descriptor or import holds the memory now.
			wantFD := map[string]int64{"early": 0, "late": 1}[mode]
			h.expectLive(t, map[string]int64{"alloc": 0, "phys": 1, "fd": wantFD})
			fmt.Fprintf(mine, "read\n")
			if line, _ := rd.ReadString('\n'); line != "ok\n" {
				t.Fatalf("the consumer after the exporter let go: %q; stderr: %s", strings.TrimSpace(line), stderr.String())
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("the consumer exited: %v; stderr: %s", err, stderr.String())
			}
			h.expectLive(t, map[string]int64{"phys": 0, "fd": 0})
		})
	}
}

// TestUnimportedFDHoldsTheMemory: in one process, a descriptor exported
// and never imported keeps the allocation after the lease is released:
// the device's free memory stays down until the descriptor is closed.
func TestUnimportedFDHoldsTheMemory(t *testing.T) {
	h := newHarness(t, smallOpts(), nil)
	h.needFake(t)
	srcs, _ := makeSources(rand.New(rand.NewPCG(12, 12)), 30000)
	free := func() int64 {
		ds, err := h.c.Devices()
		if err != nil {
			t.Fatal(err)
		}
		return ds[0].FreeBytes
	}
	l := h.stage(t, 0, srcs)
	before := free() + l.Bytes // what release alone would give back
	f, err := h.c.ExportFD(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	if got := free(); got != before-l.Bytes {
		t.Errorf("free after release with the descriptor open = %d, want %d (still allocated)", got, before-l.Bytes)
	}
	h.expectLive(t, map[string]int64{"alloc": 0, "phys": 1, "fd": 1})
	f.Close()
	if got := free(); got != before {
		t.Errorf("free after closing the descriptor = %d, want %d", got, before)
	}
	h.expectLive(t, map[string]int64{"phys": 0, "fd": 0})
}
