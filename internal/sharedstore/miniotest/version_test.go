package miniotest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakefileAgrees: `make minio` builds the version the tests look for.
func TestMakefileAgrees(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "MINIO_VERSION := "+Version+"\n") {
		t.Fatalf("the Makefile's MINIO_VERSION is not %s", Version)
	}
}
