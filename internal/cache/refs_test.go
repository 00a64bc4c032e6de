package cache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

func TestRefsRoundTrip(t *testing.T) {
	s := newStore(t, Options{})
	ds := hub.MustRepo(hub.Dataset, "ns/data")
	for _, rev := range []string{"main", "refs/pr/1", "v1.0"} {
		if _, err := s.ReadRef(ds, rev); !errors.Is(err, ErrNotCached) {
			t.Errorf("ReadRef(%s) before write = %v, want ErrNotCached", rev, err)
		}
		if err := s.WriteRef(ds, rev, testCommit); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ReadRef(ds, rev); err != nil || got != testCommit {
			t.Errorf("ReadRef(%s) = %q, %v", rev, got, err)
		}
	}
	// The HF layout: refs/refs/pr/1 holding the commit, no newline.
	b, err := os.ReadFile(filepath.Join(s.opts.Dir, "datasets--ns--data", "refs", "refs", "pr", "1"))
	if err != nil || string(b) != testCommit {
		t.Errorf("refs/refs/pr/1 = %q, %v", b, err)
	}
	other := strings.Repeat("d", 40)
	if err := s.WriteRef(ds, "main", other); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ReadRef(ds, "main"); got != other {
		t.Errorf("overwritten ref = %q", got)
	}
	// "refs/pr" is a directory here, not a ref.
	if _, err := s.ReadRef(ds, "refs/pr"); !errors.Is(err, ErrNotCached) {
		t.Errorf("ReadRef(refs/pr) = %v, want ErrNotCached", err)
	}
}

func TestRefsRejectHostileInput(t *testing.T) {
	s := newStore(t, Options{})
	var inv *hub.InvalidError
	for _, rev := range []string{"", "../x", "a/../../b", "/abs", "a\\b", ".hidden", "a/.git", "x.lock"} {
		if err := s.WriteRef(testRepo, rev, testCommit); !errors.As(err, &inv) {
			t.Errorf("WriteRef(rev %q) = %v, want *hub.InvalidError", rev, err)
		}
		if _, err := s.ReadRef(testRepo, rev); !errors.As(err, &inv) {
			t.Errorf("ReadRef(rev %q) = %v, want *hub.InvalidError", rev, err)
		}
	}
	for _, commit := range []string{"", "main", strings.Repeat("A", 40), testCommit + "\n", "../" + testCommit[3:]} {
		if err := s.WriteRef(testRepo, "main", commit); !errors.As(err, &inv) {
			t.Errorf("WriteRef(commit %q) = %v, want *hub.InvalidError", commit, err)
		}
	}
	// A hostile id cannot become a hub.Repo at all; the zero Repo, the one
	// invalid value, is refused.
	if _, err := hub.ParseRepo(hub.Model, "../../etc"); !errors.As(err, &inv) {
		t.Errorf("ParseRepo(../../etc) = %v", err)
	}
	if err := s.WriteRef(hub.Repo{}, "main", testCommit); !errors.As(err, &inv) {
		t.Errorf("WriteRef(zero repo) = %v", err)
	}
	if _, _, err := s.Stat(testRepo, testCommit, "../../../etc/passwd"); !errors.As(err, &inv) {
		t.Errorf("Stat(hostile path) = %v", err)
	}
	if _, _, err := s.Stat(testRepo, "main", "a"); !errors.As(err, &inv) {
		t.Errorf("Stat(non-commit) = %v", err)
	}
	// Nothing escaped the cache root.
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.opts.Dir), "x")); err == nil {
		t.Error("a file was written outside the cache")
	}
}

// A ref file that does not hold a commit is not a cached answer.
func TestReadRefCorrupt(t *testing.T) {
	s := newStore(t, Options{})
	name := s.paths.ref(testRepo, "main")
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadRef(testRepo, "main"); !errors.Is(err, ErrNotCached) {
		t.Errorf("ReadRef of garbage = %v, want ErrNotCached", err)
	}
}

func TestMetaRoundTrip(t *testing.T) {
	s := newStore(t, Options{})
	keys := []string{"api/models/org/model/revision/main", "../../etc/passwd", "", strings.Repeat("k", 5000)}
	for i, key := range keys {
		if _, err := s.GetMeta(key); !errors.Is(err, ErrNotCached) {
			t.Errorf("GetMeta(%q) before put = %v", key, err)
		}
		doc := []byte(`{"n":` + string(rune('0'+i)) + `}`)
		if err := s.PutMeta(key, doc); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetMeta(key); err != nil || string(got) != string(doc) {
			t.Errorf("GetMeta(%q) = %s, %v", key[:min(len(key), 20)], got, err)
		}
	}
	ents, err := os.ReadDir(s.paths.meta())
	if err != nil || len(ents) != len(keys) {
		t.Fatalf("meta dir holds %d entries (err %v), want %d", len(ents), err, len(keys))
	}
	for _, e := range ents {
		if len(e.Name()) != 64 {
			t.Errorf("meta file %q is not named by a sha256", e.Name())
		}
	}
}

// Stat finds complete files through their snapshot symlink, ignoring
// symlinks that do not point at a blob.
func TestStatComplete(t *testing.T) {
	s := newStore(t, Options{})
	data := genData(100_000, 40)
	f := fileFor("a/b/c.safetensors", data)
	openRead(t, s, f, &fakeOrigin{data: data})
	got, complete, err := s.Stat(testRepo, testCommit, f.Path)
	if err != nil || !complete || got != f {
		t.Errorf("Stat = %+v, %v, %v; want %+v", got, complete, err, f)
	}
	if _, _, err := s.Stat(testRepo, testCommit, "missing"); !errors.Is(err, ErrNotCached) {
		t.Errorf("Stat(missing) = %v", err)
	}
	other := strings.Repeat("e", 40)
	if _, _, err := s.Stat(testRepo, other, f.Path); !errors.Is(err, ErrNotCached) {
		t.Errorf("Stat(other commit) = %v", err)
	}
	// A symlink pointing elsewhere is not a cached file.
	evil := s.paths.snapshot(testRepo, other, "evil")
	if err := os.MkdirAll(filepath.Dir(evil), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", evil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Stat(testRepo, other, "evil"); !errors.Is(err, ErrNotCached) {
		t.Errorf("Stat(evil symlink) = %v", err)
	}
}
