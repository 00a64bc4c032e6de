package cache

import (
	"errors"
	"testing"
)

func TestOneStorePerDirectory(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second store on one directory: %v, want ErrLocked", err)
	}
	if _, err := Prune(t.Context(), dir, PruneOptions{MaxBytes: 1}); !errors.Is(err, ErrLocked) {
		t.Fatalf("prune under a live store: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("reopening after Close: %v", err)
	}
	s2.Close()
}
