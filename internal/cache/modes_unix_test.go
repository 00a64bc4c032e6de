//go:build unix

package cache

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Security review: cached blobs, gated ones included, were 0644 in 0755
// directories: any user of the host could read them. Everything the cache
// writes is now 0640 in 0750 directories (group-readable for the Helm
// sidecar's read-only mount, never other users), under any umask.
func TestCachedFilesNotReadableByOthers(t *testing.T) {
	old := syscall.Umask(0) // the widest modes the code asks for show
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	s := newStore(t, Options{Dir: dir})
	blob := genData(300<<10, 1)
	openRead(t, s, fileFor("gated/model.safetensors", blob), &fakeOrigin{data: blob})
	part := genData(1<<20, 2)
	h, err := s.Open(context.Background(), fileFor("partial.bin", part), &fakeOrigin{data: part})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.ReadAt(make([]byte, 100), 0); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if err := s.WriteRef(testRepo, "main", testCommit); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMeta("some-key", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // partials' state written
		t.Fatal(err)
	}

	var files int
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o640)
		if d.IsDir() {
			want = 0o750
		} else {
			files++
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o (no access for other users)", p, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The blob, the partial's data and state, the ref, the meta file, the
	// lock and the layout version, at least.
	if files < 7 {
		t.Fatalf("walked %d files, want every kind the cache writes", files)
	}
}

// A cache an older version made (0755 directories, 0644 files) stops
// being readable by other users once opened: its top directories lose
// their access for others, without a walk of every file.
func TestOlderCacheTightened(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	blob := filepath.Join(dir, testRepo.CacheDir(), "blobs", sha256Hex([]byte("x")))
	for _, d := range []string{filepath.Dir(blob), filepath.Join(dir, ".hubproxy", "meta"), filepath.Join(dir, "not-a-repo")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(blob, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	newStore(t, Options{Dir: dir})
	for name, want := range map[string]fs.FileMode{testRepo.CacheDir(): 0o750, ".hubproxy": 0o750, "not-a-repo": 0o755} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o after open, want %o", name, got, want)
		}
	}
}
