//go:build unix

package sharedstore

import (
	"context"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
)

// Security review: a file:// store's chunks (of gated files too) and
// claims were 0644 in 0755 directories, readable by any user of a host or
// pod that mounts the volume. Objects are 0600 and directories 0700, under
// the usual umask as under none.
func TestFileStoreNotReadableByOthers(t *testing.T) {
	old := syscall.Umask(0) // the widest modes the code asks for show
	t.Cleanup(func() { syscall.Umask(old) })
	root := t.TempDir()
	s, err := Open(context.Background(), "file://"+root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Create(ctx, "v3/chunks/ab12/8388608/0", []byte("chunk")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "v3/claims/ab12/8388608/0/0", []byte("claim")); err != nil {
		t.Fatal(err)
	}
	seen := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
		seen++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 10 {
		t.Fatalf("walked %d entries, want the objects, their directories and .tmp", seen)
	}
}
