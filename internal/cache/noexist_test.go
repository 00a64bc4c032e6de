package cache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
