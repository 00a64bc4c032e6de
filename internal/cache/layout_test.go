package cache

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLinkTarget(t *testing.T) {
	tests := []struct{ path, want string }{
		{"config.json", "../../blobs/E"},
		{"a/b.bin", "../../../blobs/E"},
		{"a/b/c/d.bin", "../../../../../blobs/E"},
	}
	for _, tt := range tests {
		if got := linkTarget(tt.path, "E"); got != tt.want {
			t.Errorf("linkTarget(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestParseRepoDir(t *testing.T) {
	for _, name := range []string{"models--org--model", "datasets--ns--d.x", "spaces--one"} {
		r, ok := parseRepoDir(name)
		if !ok || r.CacheDir() != name {
			t.Errorf("parseRepoDir(%q) = %v, %v", name, r, ok)
		}
	}
	for _, name := range []string{".hubproxy", ".locks", "models", "models--a--b--c", "buckets--a--b", "models--..--x"} {
		if r, ok := parseRepoDir(name); ok {
			t.Errorf("parseRepoDir(%q) accepted as %v", name, r)
		}
	}
}

// The tree the store leaves is what huggingface_hub expects: relative
// symlinks from snapshots into blobs, and nothing named *.incomplete or
// under .locks.
func TestHFLayout(t *testing.T) {
	s := newStore(t, Options{})
	data := genData(300_000, 50)
	f := fileFor("text_encoder/model.safetensors", data)
	openRead(t, s, f, &fakeOrigin{data: data})
	if err := s.WriteRef(testRepo, "main", testCommit); err != nil {
		t.Fatal(err)
	}

	repoDir := filepath.Join(s.opts.Dir, "models--org--model")
	link := filepath.Join(repoDir, "snapshots", testCommit, "text_encoder", "model.safetensors")
	target, err := os.Readlink(link)
	if err != nil || target != "../../../blobs/"+f.ETag {
		t.Fatalf("snapshot link = %q, %v", target, err)
	}
	b, err := os.ReadFile(link)
	if err != nil || string(b) != string(data) {
		t.Fatalf("reading through the link: %v", err)
	}
	if ref, _ := os.ReadFile(filepath.Join(repoDir, "refs", "main")); string(ref) != testCommit {
		t.Errorf("refs/main = %q", ref)
	}
	err = filepath.WalkDir(s.opts.Dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(name, ".incomplete") || d.Name() == ".locks" {
			t.Errorf("store created %s", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A second commit sharing the blob gets its own link; a deleted link is
	// recreated on Open.
	f2 := f
	f2.Commit = strings.Repeat("f", 40)
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	for _, g := range []File{f, f2} {
		h, err := s.Open(context.Background(), g, &fakeOrigin{data: data})
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
		if _, err := os.Readlink(s.paths.snapshot(testRepo, g.Commit, g.Path)); err != nil {
			t.Errorf("link for commit %s: %v", g.Commit[:4], err)
		}
	}
}

// A blob deleted behind the store's back (huggingface-cli delete-cache) is
// fetched again rather than failing.
func TestBlobDeletedExternally(t *testing.T) {
	s := newStore(t, Options{})
	data := genData(100_000, 51)
	f := fileFor("a.bin", data)
	o := &fakeOrigin{data: data}
	openRead(t, s, f, o)
	if err := os.Remove(s.paths.blob(testRepo, f.ETag)); err != nil {
		t.Fatal(err)
	}
	openRead(t, s, f, o)
	if got := o.bytes.Load(); got != 2*f.Size {
		t.Errorf("upstream bytes = %d, want %d", got, 2*f.Size)
	}
}
