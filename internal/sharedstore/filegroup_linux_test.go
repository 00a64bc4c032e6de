//go:build linux

package sharedstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMain lets the test binary act as another node's process: run with
// HUBPROXY_STORE_HELPER set to a store URL, it does the operations in
// HUBPROXY_STORE_OPS and exits instead of running tests.
func TestMain(m *testing.M) {
	if url := os.Getenv("HUBPROXY_STORE_HELPER"); url != "" {
		os.Exit(storeHelper(url, os.Getenv("HUBPROXY_STORE_OPS")))
	}
	os.Exit(m.Run())
}

// storeHelper runs ops, space-separated: create:KEY=DATA, put:KEY=DATA,
// read:KEY (prints KEY=DATA) and delete:KEY. It prints "uid N" first.
func storeHelper(url, ops string) int {
	fmt.Printf("uid %d\n", os.Getuid())
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	ctx := context.Background()
	s, err := Open(ctx, url, Options{})
	if err != nil {
		return fail(err)
	}
	for _, op := range strings.Fields(ops) {
		verb, arg, _ := strings.Cut(op, ":")
		key, data, _ := strings.Cut(arg, "=")
		switch verb {
		case "create":
			err = s.Create(ctx, key, []byte(data))
		case "put":
			err = s.Put(ctx, key, []byte(data))
		case "delete":
			err = s.Delete(ctx, key)
		case "read":
			var body io.ReadCloser
			if body, _, err = s.ReadRange(ctx, key, 0, -1); err == nil {
				var b []byte
				b, err = io.ReadAll(body)
				body.Close()
				fmt.Printf("%s=%s\n", key, b)
			}
		default:
			err = fmt.Errorf("unknown op %q", op)
		}
		if err != nil {
			return fail(fmt.Errorf("%s: %w", op, err))
		}
	}
	return 0
}

// The store's group, and nodes' uids in it and out of it: numbers no user
// of the machine has, which root may take all the same.
const (
	storeGID = 64123
	nodeA    = 65534 // nobody
	nodeB    = 64124
	outsider = 64125 // in another group
)

// Review of the shared tier (issue 21): a file:// store could not be shared
// by nodes running as different uids. With mode=group, two uids of the
// store's group each write, read, replace and delete what the other made,
// under a umask of 077, and a uid outside the group can neither open the
// store nor read a chunk past it. The same two uids on a private store
// cannot share it: the helpers do run as those uids.
func TestFileStoreSharedByAGroup(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run nodes as other uids (CI runs as root)")
	}
	base, bin := helperBase(t)
	old := syscall.Umask(0o077) // the nodes' umask: modes come from the store
	t.Cleanup(func() { syscall.Umask(old) })
	store := filepath.Join(base, "store")
	if err := os.Mkdir(store, 0o700); err != nil {
		t.Fatal(err)
	}
	// What the operator does once: the group owns the directory, and its
	// set-group-ID bit gives everything made in it that group.
	if err := os.Chown(store, 0, storeGID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(store, 0o770|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	url := "file://" + store + "?mode=group"

	run(t, bin, url, nodeA, storeGID, true, "create:v3/chunks/ab/1024/0=a0 put:v3/claims/ab/1024/0/0=claim-a")
	out := run(t, bin, url, nodeB, storeGID, true,
		"read:v3/chunks/ab/1024/0 create:v3/chunks/ab/1024/1=b1 put:v3/claims/ab/1024/0/0=claim-b delete:v3/chunks/ab/1024/0")
	if !strings.Contains(out, "v3/chunks/ab/1024/0=a0") {
		t.Errorf("node B read %q, want node A's chunk", out)
	}
	out = run(t, bin, url, nodeA, storeGID, true, "read:v3/chunks/ab/1024/1 read:v3/claims/ab/1024/0/0 create:v3/chunks/ab/1024/0=a0")
	if !strings.Contains(out, "v3/chunks/ab/1024/1=b1") || !strings.Contains(out, "v3/claims/ab/1024/0/0=claim-b") {
		t.Errorf("node A read %q, want node B's chunk and claim", out)
	}
	out = run(t, bin, url, outsider, storeGID+1, false, "read:v3/chunks/ab/1024/1")
	if !strings.Contains(out, "not readable by this node's user") {
		t.Errorf("a uid outside the group opened the store: %q", out)
	}

	owners := map[uint32]bool{}
	err := filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == store {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o660)
		if d.IsDir() {
			want = 0o770 | fs.ModeSetgid | fs.ModeDir
		}
		st := info.Sys().(*syscall.Stat_t)
		if info.Mode() != want || st.Gid != storeGID {
			t.Errorf("%s: mode %v group %d, want %v group %d", p, info.Mode(), st.Gid, want, storeGID)
		}
		owners[st.Uid] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !owners[nodeA] || !owners[nodeB] || len(owners) != 2 {
		t.Errorf("entries owned by %v, want both nodes' uids and no other", owners)
	}

	// A private store, which is one user's: the second uid is refused.
	private := filepath.Join(base, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(private, nodeA, storeGID); err != nil {
		t.Fatal(err)
	}
	run(t, bin, "file://"+private, nodeA, storeGID, true, "create:v3/chunks/ab/1024/0=a0")
	out = run(t, bin, "file://"+private, nodeB, storeGID, false, "read:v3/chunks/ab/1024/0")
	if !strings.Contains(out, "not readable by this node's user") {
		t.Errorf("a second uid opened a private store: %q", out)
	}
}

// helperBase makes a directory other uids may pass through, holding a copy
// of this test binary they may run (the build's own is in a directory only
// root may enter).
func helperBase(t *testing.T) (base, bin string) {
	t.Helper()
	base, err := os.MkdirTemp("", "hubproxy-groupstore-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(base, "node")
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o755); err != nil { // the umask may have taken some
		t.Fatal(err)
	}
	return base, bin
}

// run runs the helper as uid:gid on the store at url and returns what it
// printed; ok says whether it must succeed or fail.
func run(t *testing.T, bin, url string, uid, gid uint32, ok bool, ops string) string {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "HUBPROXY_STORE_HELPER="+url, "HUBPROXY_STORE_OPS="+ops)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{gid}}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if !strings.HasPrefix(out.String(), fmt.Sprintf("uid %d\n", uid)) {
		t.Fatalf("the helper did not run as uid %d: %v, %q", uid, err, out.String())
	}
	if (err == nil) != ok {
		t.Fatalf("uid %d gid %d, %s: %v, %q; want success %v", uid, gid, ops, err, out.String(), ok)
	}
	return out.String()
}
