//go:build unix

package sharedstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hubproxy/hubproxy/internal/testutil"
)

// Security review: a file:// store's chunks (of gated files too) and
// claims were 0644 in 0755 directories, readable by any user of a host or
// pod that mounts the volume. Objects are 0600 and directories 0700, under
// no umask as under the usual one or a tight one. Review of the shared tier
// (issue 21): nodes of different uids could not share a store; with
// mode=group its directories are 2770 and objects 0660, whatever the
// umask, and still nothing is open to other users.
func TestFileStoreModes(t *testing.T) {
	for _, tc := range []struct {
		query     string
		file, dir fs.FileMode
	}{
		{"default", 0o600, 0o700},
		{"?mode=private", 0o600, 0o700},
		{"?mode=group", 0o660, 0o770 | fs.ModeSetgid},
	} {
		for _, umask := range []int{0, 0o022, 0o077} {
			t.Run(fmt.Sprintf("%s umask %03o", tc.query, umask), func(t *testing.T) {
				old := syscall.Umask(umask)
				t.Cleanup(func() { syscall.Umask(old) })
				root := t.TempDir()
				writeSome(t, "file://"+root+strings.TrimPrefix(tc.query, "default"))
				seen := 0
				err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
					if err != nil || p == root {
						return err
					}
					info, err := d.Info()
					if err != nil {
						return err
					}
					want := tc.file
					if d.IsDir() {
						want = tc.dir | fs.ModeDir
					}
					if got := info.Mode(); got != want {
						t.Errorf("%s: mode %v, want %v", p, got, want)
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
			})
		}
	}
}

// writeSome opens the store at url and writes a chunk and a claim.
func writeSome(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, "v3/chunks/ab12/8388608/0", []byte("chunk")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "v3/claims/ab12/8388608/0/0", []byte("claim")); err != nil {
		t.Fatal(err)
	}
}

// A store whose own directories or objects other users may enter (made
// by an older version, or by hand) is refused at open, saying how to close
// it: serving from it would hand other users of the host chunks of gated
// files. A root open to them is only warned about: it may be a mount point
// the node does not own, and its closed entries keep the chunks unreadable.
func TestFileStoreOpenToOthers(t *testing.T) {
	ctx := context.Background()
	for _, open := range []string{"v3", "v3/chunks", ".tmp", "v3/clock", "v3/claims", "v12"} {
		t.Run(open, func(t *testing.T) {
			root := t.TempDir()
			writeSome(t, "file://"+root)
			if err := os.WriteFile(filepath.Join(root, "v3/clock"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(root, "v12"), 0o700); err != nil { // a later layout's
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(root, open), 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := Open(ctx, "file://"+root+"?mode=group", Options{ReadOnly: true})
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "open to other users") || !strings.Contains(err.Error(), "chmod -R o-rwx "+root) {
				t.Fatalf("opening a store whose %s is 0755: %v, want a ConfigError saying how to close it", open, err)
			}
		})
	}

	root := t.TempDir()
	writeSome(t, "file://"+root)
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// Not the store's: a file system's lost+found (root's, 0700 on ext4,
	// unreadable by a node's user), something an operator left.
	for _, d := range []string{"lost+found", "notes", "v3x"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, "f"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := Open(ctx, "file://"+root, Options{Logger: log}); err != nil {
		t.Fatalf("a 0755 root whose entries are closed: %v, want it opened", err)
	}
	if !strings.Contains(logs.String(), "other users of this host may enter") {
		t.Errorf("no warning about the 0755 root: %q", logs.String())
	}
	if strings.Contains(logs.String(), "set-group-ID") {
		t.Errorf("a private store warned about set-group-ID: %q", logs.String())
	}
	var glogs testutil.SyncBuffer
	if _, err := Open(ctx, "file://"+root+"?mode=group", Options{Logger: slog.New(slog.NewTextHandler(&glogs, nil))}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(glogs.String(), "not set-group-ID") {
		t.Errorf("mode=group on a root without the set-group-ID bit: no warning in %q", glogs.String())
	}
}
