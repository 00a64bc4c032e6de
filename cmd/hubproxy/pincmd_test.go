package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A pinned repo survives prune however old its files are; ls and pins show
// the pin; unpin hands it back to prune.
func TestCachePinKeepsARepoFromPrune(t *testing.T) {
	dir, _, blobs, _ := pulledCache(t)
	old := time.Now().Add(-90 * 24 * time.Hour)
	for _, b := range blobs {
		if err := os.Chtimes(b, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := runCmd(t, "cache", "pin", "org/m@main", "--cache-dir", dir); err != nil || !strings.Contains(out, "pinned org/m@main") {
		t.Fatalf("pin: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "cache", "pin", "org/m@main", "--cache-dir", dir); err != nil || !strings.Contains(out, "already pinned") {
		t.Fatalf("pin again: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "cache", "ls", "--cache-dir", dir); err != nil || !regexp.MustCompile(`(?m)^org/m\s.*\smain\s+\d{4}-`).MatchString(out) {
		t.Fatalf("ls does not show the pin: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "cache", "pins", "--cache-dir", dir); err != nil || !strings.Contains(out, "org/m@main\t(cache pin)") {
		t.Fatalf("pins: %v\n%s", err, out)
	}
	out, err := runCmd(t, "cache", "prune", "--older-than", "720h", "--cache-dir", dir)
	if err != nil || !strings.Contains(out, "removed 0 files") || !strings.Contains(out, "kept") {
		t.Fatalf("prune of a pinned repo: %v\n%s", err, out)
	}
	for _, b := range blobs {
		if _, err := os.Stat(b); err != nil {
			t.Errorf("pruned a pinned blob: %v", err)
		}
	}
	if out, err := runCmd(t, "cache", "unpin", "org/m@main", "--cache-dir", dir); err != nil || !strings.Contains(out, "unpinned") {
		t.Fatalf("unpin: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "cache", "prune", "--older-than", "720h", "--cache-dir", dir); err != nil || !strings.Contains(out, "removed 5 files") {
		t.Fatalf("prune after unpin: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "cache", "pin", "org/../m", "--cache-dir", dir); err == nil {
		t.Error("pin of an invalid repo id succeeded")
	}
}
