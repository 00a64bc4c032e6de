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
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("reopening after Close: %v", err)
	}
	s2.Close()
}

func TestMetaStaysUnderItsBudget(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), MaxMetaBytes: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	doc := make([]byte, 1000)
	for i := range 50 {
		if err := s.PutMeta(string(rune('a'+i)), doc); err != nil {
			t.Fatal(err)
		}
	}
	if used := s.meta.scan(nil); used > 10_000 {
		t.Errorf(".hubproxy/meta holds %d bytes, budget 10000", used)
	}
	if _, err := s.GetMeta(string(rune('a' + 49))); err != nil {
		t.Errorf("the newest document was evicted: %v", err)
	}
}
