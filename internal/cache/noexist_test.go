package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// A missing file is recorded where huggingface_hub records it, and hostile
// names never reach the disk.
func TestNoExistMarkers(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	repo := hub.MustRepo(hub.Model, "org/m")
	commit := strings.Repeat("a", 40)
	if s.NoExist(repo, commit, "adapter_config.json") {
		t.Fatal("marker before it was written")
	}
	for _, p := range []string{"adapter_config.json", "sub/dir/modules.json"} {
		if err := s.WriteNoExist(repo, commit, p); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteNoExist(repo, commit, p); err != nil {
			t.Fatalf("second write: %v", err)
		}
		if !s.NoExist(repo, commit, p) {
			t.Fatalf("%s not recorded", p)
		}
		info, err := os.Stat(filepath.Join(dir, "models--org--m", ".no_exist", commit, filepath.FromSlash(p)))
		if err != nil || info.Size() != 0 {
			t.Fatalf("%s: not huggingface_hub's empty marker: %v", p, err)
		}
	}
	if s.NoExist(repo, strings.Repeat("b", 40), "adapter_config.json") {
		t.Error("a marker leaked to another commit")
	}
	if err := s.WriteNoExist(repo, commit, "../../x"); err == nil {
		t.Error("a path with .. was accepted")
	}
	if err := s.WriteNoExist(repo, "main", "x"); err == nil {
		t.Error("a branch was accepted as a commit")
	}
	if s.NoExist(repo, commit, "../../x") {
		t.Error("NoExist answered for a hostile path")
	}
}

// markerEntries counts the files and directories under every .no_exist of
// dir, as the bounds count them.
func markerEntries(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	repos, _ := os.ReadDir(dir)
	for _, r := range repos {
		root := filepath.Join(dir, r.Name(), ".no_exist")
		commits, _ := os.ReadDir(root)
		for _, c := range commits {
			filepath.WalkDir(filepath.Join(root, c.Name()), func(path string, _ os.DirEntry, err error) error {
				if err == nil && path != filepath.Join(root, c.Name()) {
					n++
				}
				return nil
			})
		}
	}
	return n
}

func commitN(i int) string { return fmt.Sprintf("%040x", i+1) }

// Made-up paths cannot fill the disk with markers: past a commit's bound
// no more are recorded for it (the first ones stay); past the overall
// bound the commits written to least recently lose theirs, and the newest
// markers always answer.
func TestNoExistMarkersAreBounded(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MaxNoExist: 10, MaxNoExistPerCommit: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	repo := hub.MustRepo(hub.Model, "org/m")
	a := commitN(0)
	for i := range 6 {
		if err := s.WriteNoExist(repo, a, fmt.Sprintf("made-up-%d", i)); err != nil {
			t.Fatalf("write past the commit's bound: %v", err)
		}
	}
	if got := markerEntries(t, dir); got != 4 {
		t.Errorf("%d entries for one commit, want its bound 4", got)
	}
	if !s.NoExist(repo, a, "made-up-0") || !s.NoExist(repo, a, "made-up-3") || s.NoExist(repo, a, "made-up-4") {
		t.Error("a full commit should keep its first markers and record no more")
	}
	// A nested path costs its directories too: a/b/c is three entries.
	b := commitN(1)
	if err := s.WriteNoExist(repo, b, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	// Many commits, each a marker or two: the total stays within 10.
	for i := 2; i < 40; i++ {
		for _, p := range []string{"adapter_config.json", "x"} {
			if err := s.WriteNoExist(repo, commitN(i), p); err != nil {
				t.Fatal(err)
			}
			if got := markerEntries(t, dir); got > 10 {
				t.Fatalf("commit %d: %d entries on disk, want at most 10", i, got)
			}
		}
	}
	for i := 37; i < 40; i++ {
		if !s.NoExist(repo, commitN(i), "adapter_config.json") || !s.NoExist(repo, commitN(i), "x") {
			t.Errorf("commit %d: the newest markers do not answer", i)
		}
	}
	if s.NoExist(repo, a, "made-up-0") || s.NoExist(repo, b, "a/b/c") {
		t.Error("the oldest markers were not the ones removed")
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, ".hubproxy", "tmp")); len(ents) != 0 {
		t.Errorf("removed markers left in tmp/: %d", len(ents))
	}
}

// Markers already on disk (an earlier run's, or huggingface_hub's) count:
// a cache opened over too many is brought within the bound at the next
// write, which still answers.
func TestNoExistBoundCountsMarkersOnDisk(t *testing.T) {
	dir := t.TempDir()
	repo := hub.MustRepo(hub.Model, "org/m")
	old := time.Now().Add(-time.Hour)
	for i := range 30 {
		d := filepath.Join(dir, "models--org--m", ".no_exist", commitN(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "f.json"), nil, 0o644)
		os.Chtimes(d, old, old.Add(time.Duration(i)*time.Second))
	}
	s, err := Open(Options{Dir: dir, MaxNoExist: 10, MaxNoExistPerCommit: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.NoExist(repo, commitN(29), "f.json") {
		t.Fatal("huggingface_hub's marker is not read")
	}
	if err := s.WriteNoExist(repo, commitN(100), "new.json"); err != nil {
		t.Fatal(err)
	}
	if got := markerEntries(t, dir); got > 10 {
		t.Errorf("%d entries on disk, want at most 10", got)
	}
	if !s.NoExist(repo, commitN(100), "new.json") || !s.NoExist(repo, commitN(29), "f.json") {
		t.Error("the newest markers do not answer")
	}
	if s.NoExist(repo, commitN(0), "f.json") {
		t.Error("the oldest marker on disk was kept")
	}
}
