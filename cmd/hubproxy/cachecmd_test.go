package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pulledCache fills a fresh cache directory with the pull fixture.
func pulledCache(t *testing.T) (dir, upstream string, blobs []string, sizes []int64) {
	t.Helper()
	h, files, _ := pullFixture(t)
	dir = t.TempDir()
	if out, err := runCmd(t, "pull", "--upstream", h.URL, "--cache-dir", dir, "--progress", "none", "org/m"); err != nil {
		t.Fatalf("pull: %v\n%s", err, out)
	}
	for _, f := range files {
		blobs = append(blobs, filepath.Join(dir, "models--org--m", "blobs", blobName(f)))
		sizes = append(sizes, int64(len(f.Data)))
	}
	return dir, h.URL, blobs, sizes
}

func TestCacheVerifyFindsCorruptBlob(t *testing.T) {
	dir, upstream, blobs, _ := pulledCache(t)
	out, err := runCmd(t, "cache", "verify", "--cache-dir", dir)
	if err != nil || !strings.Contains(out, "verified 5 blobs") || !strings.Contains(out, ": 0 corrupt") {
		t.Fatalf("verify of a clean cache: %v\n%s", err, out)
	}

	// Flip one byte in the middle of the first shard.
	b, err := os.ReadFile(blobs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x80
	if err := os.WriteFile(blobs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	etag := filepath.Base(blobs[0])
	out, err = runCmd(t, "cache", "verify", "--cache-dir", dir)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(out, "CORRUPT org/m "+etag) || !strings.Contains(out, ": 1 corrupt") {
		t.Fatalf("verify of a corrupt cache: %v\n%s", err, out)
	}
	if _, err := os.Stat(blobs[0]); err != nil {
		t.Error("verify without --fix removed the blob")
	}

	out, err = runCmd(t, "cache", "verify", "--cache-dir", dir, "--fix")
	if err != nil || !strings.Contains(out, "(removed)") {
		t.Fatalf("verify --fix: %v\n%s", err, out)
	}
	if _, err := os.Stat(blobs[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("corrupt blob still there: %v", err)
	}
	if out, err := runCmd(t, "cache", "verify", "--cache-dir", dir); err != nil || !strings.Contains(out, "verified 4 blobs") {
		t.Errorf("after --fix: %v\n%s", err, out)
	}
	// The next pull fetches the removed file again, intact.
	if out, err := runCmd(t, "pull", "--upstream", upstream, "--cache-dir", dir, "--progress", "none", "org/m"); err != nil {
		t.Fatalf("pull after fix: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "cache", "verify", "--cache-dir", dir); err != nil || !strings.Contains(out, "verified 5 blobs") {
		t.Errorf("after refetch: %v\n%s", err, out)
	}
}

func TestCachePruneFreesToTarget(t *testing.T) {
	dir, _, blobs, sizes := pulledCache(t)
	var total int64
	for _, n := range sizes {
		total += n
	}
	out, err := runCmd(t, "cache", "du", "--cache-dir", dir, "--bytes")
	if err != nil || !regexp.MustCompile(`(?m)^\s*`+strconv.FormatInt(total, 10)+`\s+0\s+`+strconv.FormatInt(total, 10)+`\s+org/m$`).MatchString(out) {
		t.Fatalf("du: %v\n%s", err, out)
	}
	out, err = runCmd(t, "cache", "ls", "--cache-dir", dir)
	if err != nil || !regexp.MustCompile(`(?m)^org/m\s+model\s+5\s+\S+ KiB\s+-\s+1\s+-\s+\d{4}-\d\d-\d\d`).MatchString(out) {
		t.Fatalf("ls: %v\n%s", err, out)
	}

	// Age the blobs: file i was last used 40-i days ago.
	now := time.Now()
	for i, b := range blobs {
		when := now.Add(-time.Duration(40-i) * 24 * time.Hour)
		if err := os.Chtimes(b, when, when); err != nil {
			t.Fatal(err)
		}
	}
	target := total / 2
	out, err = runCmd(t, "cache", "prune", "--cache-dir", dir, "--max-bytes", strconv.FormatInt(target, 10))
	if err != nil || !strings.Contains(out, "removed org/m blob "+filepath.Base(blobs[0])) || !strings.Contains(out, "[size]") {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	var left int64
	removedAll := true
	for i, b := range blobs {
		_, err := os.Stat(b)
		if err == nil {
			left += sizes[i]
			removedAll = false
		} else if !removedAll {
			t.Errorf("blob %d removed after a more recently used one was kept", i)
		}
	}
	// Exactly the oldest files whose removal reaches the target go.
	want := total
	for i := 0; want > target; i++ {
		want -= sizes[i]
	}
	if left > target || left != want {
		t.Errorf("after prune: %d bytes left, want %d (target %d)\n%s", left, want, target, out)
	}

	if _, err := runCmd(t, "cache", "prune", "--cache-dir", dir); err == nil {
		t.Error("prune without a target accepted")
	}
	out, err = runCmd(t, "cache", "prune", "--cache-dir", dir, "--older-than", "720h", "--dry-run")
	if err != nil || !strings.Contains(out, "would remove") {
		t.Fatalf("prune --older-than --dry-run: %v\n%s", err, out)
	}
	out, err = runCmd(t, "cache", "prune", "--cache-dir", dir, "--older-than", "720h")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "models--org--m")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("repo folder kept after its last blob went: %v\n%s", err, out)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Hour: "1h", time.Minute: "1m", 90 * time.Minute: "1h30m", 30 * time.Second: "30s", 0: "0",
		time.Hour + time.Second: "1h0m1s", 1500 * time.Millisecond: "1.5s"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
		if d != 0 {
			if back, err := parseDuration(shortDuration(d)); err != nil || back != d {
				t.Errorf("parseDuration(%q) = %v, %v; want %v", shortDuration(d), back, err, d)
			}
		}
	}
}

// TestCacheLsAndDuJSON decodes `cache ls --json` and `cache du --json` the
// way a script would: by the documented snake_case names, sizes in bytes.
func TestCacheLsAndDuJSON(t *testing.T) {
	dir, _, _, sizes := pulledCache(t)
	var total int64
	for _, n := range sizes {
		total += n
	}

	out, err := runCmd(t, "cache", "ls", "--cache-dir", dir, "--json")
	if err != nil {
		t.Fatalf("cache ls --json: %v\n%s", err, out)
	}
	var ls struct {
		Repos []map[string]any `json:"repos"`
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil || len(ls.Repos) != 1 {
		t.Fatalf("cache ls --json: %v\n%s", err, out)
	}
	r := ls.Repos[0]
	for key, want := range map[string]any{"repo": "org/m", "type": "model", "id": "org/m", "files": 5.0, "bytes": float64(total),
		"partial_files": 0.0, "partial_bytes": 0.0, "revisions": 1.0} {
		if r[key] != want {
			t.Errorf("cache ls --json: %s = %v, want %v", key, r[key], want)
		}
	}
	if s, _ := r["last_access"].(string); s == "" {
		t.Errorf("cache ls --json: last_access = %v", r["last_access"])
	} else if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		t.Errorf("cache ls --json: last_access: %v", err)
	}
	if p, ok := r["pinned"].([]any); !ok || len(p) != 0 {
		t.Errorf("cache ls --json: pinned = %v, want []", r["pinned"])
	}
	if len(r) != 10 {
		t.Errorf("cache ls --json: fields %v", r)
	}

	out, err = runCmd(t, "cache", "du", "--cache-dir", dir, "--json")
	if err != nil {
		t.Fatalf("cache du --json: %v\n%s", err, out)
	}
	var du struct {
		Repos []map[string]any `json:"repos"`
		Total map[string]any   `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &du); err != nil || len(du.Repos) != 1 {
		t.Fatalf("cache du --json: %v\n%s", err, out)
	}
	wantRepo := map[string]any{"repo": "org/m", "blob_bytes": float64(total), "partial_bytes": 0.0, "total_bytes": float64(total)}
	wantTotal := map[string]any{"repos": 1.0, "blob_bytes": float64(total), "partial_bytes": 0.0, "total_bytes": float64(total)}
	if !reflect.DeepEqual(du.Repos[0], wantRepo) || !reflect.DeepEqual(du.Total, wantTotal) {
		t.Errorf("cache du --json:\n%s\nwant repo %v, total %v", out, wantRepo, wantTotal)
	}
}

// TestCacheJSONOfAnEmptyCache: no repos is an empty list, not null, so
// `jq '.repos[]'` works on a fresh cache.
func TestCacheJSONOfAnEmptyCache(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []string{"ls", "du"} {
		out, err := runCmd(t, "cache", c, "--cache-dir", dir, "--json")
		if err != nil || !strings.Contains(out, `"repos": []`) {
			t.Errorf("cache %s --json of an empty cache: %v\n%s", c, err, out)
		}
	}
}
