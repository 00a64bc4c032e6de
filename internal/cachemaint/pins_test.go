package cachemaint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// pinFiles is n files of 1 MiB in repo at commit, with their origins.
func pinFiles(repo hub.Repo, commit string, n int, seed byte) ([]cache.File, []*origin) {
	files := make([]cache.File, n)
	origins := make([]*origin, n)
	for i := range files {
		data := genData(1<<20, seed+byte(i))
		files[i] = cache.File{Repo: repo, Commit: commit, Path: fmt.Sprintf("f%d.bin", i), ETag: sha256Hex(data), Size: int64(len(data))}
		origins[i] = &origin{data: data}
	}
	return files, origins
}

// AddPin and RemovePin edit the pins file that cache.ReadPins (and so a
// running Store) reads, and say whether they changed it.
func TestAddAndRemovePin(t *testing.T) {
	dir := t.TempDir()
	newStore(t, cache.Options{Dir: dir}).Close() // a directory a server has used
	a, b := cache.Pin{Repo: testRepo}, cache.Pin{Repo: testRepo, Rev: "main"}
	for i, step := range []struct {
		change  func(string, cache.Pin) (bool, error)
		pin     cache.Pin
		changed bool
		want    []cache.Pin
	}{
		{AddPin, a, true, []cache.Pin{a}},
		{AddPin, a, false, []cache.Pin{a}},
		{AddPin, b, true, []cache.Pin{a, b}},
		{RemovePin, a, true, []cache.Pin{b}},
		{RemovePin, a, false, []cache.Pin{b}},
	} {
		changed, err := step.change(dir, step.pin)
		if err != nil || changed != step.changed {
			t.Fatalf("step %d (%s): changed %v, %v; want %v", i, step.pin, changed, err, step.changed)
		}
		got, err := cache.ReadPins(dir)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(step.want) {
			t.Fatalf("step %d: pins %v, %v; want %v", i, got, err, step.want)
		}
	}
}

// Pinning works on a cache directory only huggingface_hub has written,
// before any server has run on it (it has no .hubproxy/ of ours yet).
func TestPinOnPlainHFCache(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "models--org--m", "snapshots"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := cache.Pin{Repo: testRepo}
	if changed, err := AddPin(dir, p); err != nil || !changed {
		t.Fatalf("AddPin on a plain cache: changed %v, %v", changed, err)
	}
	if got, err := cache.ReadPins(dir); err != nil || len(got) != 1 || got[0] != p {
		t.Fatalf("pins %v, %v; want [%s]", got, err, p)
	}
}

// Prune passes over pinned entries and says how much it kept for them.
func TestPrunePassesOverPins(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, cache.Options{Dir: dir, ChunkSize: 256 << 10})
	pinned := hub.MustRepo(hub.Model, "org/keep")
	keep, keepO := pinFiles(pinned, testCommit, 2, 1)
	other, otherO := pinFiles(testRepo, testCommit, 2, 50)
	for i := range keep {
		openRead(t, s, keep[i], keepO[i])
		openRead(t, s, other[i], otherO[i])
	}
	s.Close()
	if _, err := AddPin(dir, cache.Pin{Repo: pinned}); err != nil {
		t.Fatal(err)
	}
	rep, err := Prune(context.Background(), dir, PruneOptions{OlderThan: time.Nanosecond, Now: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 2 || rep.Pinned != 2<<20 {
		t.Errorf("removed %d entries, kept %d pinned bytes; want the 2 unpinned removed and 2 MiB kept", len(rep.Removed), rep.Pinned)
	}
	for _, r := range rep.Removed {
		if r.Repo == pinned {
			t.Errorf("pruned pinned %s", r.ETag)
		}
	}
	etags, unresolved, err := PinnedETags(dir, nil)
	if err != nil || len(etags) != 2 || !etags[keep[0].ETag] || !etags[keep[1].ETag] || len(unresolved) != 0 {
		t.Errorf("PinnedETags = %v, %v, %v; want the pinned repo's 2 blobs", etags, unresolved, err)
	}
	// A pin this cache holds nothing of is named, even beside one it does
	// resolve: a store prune must not take its silence for "keep nothing".
	absent := cache.Pin{Repo: hub.MustRepo(hub.Model, "org/absent")}
	etags, unresolved, err = PinnedETags(dir, []cache.Pin{absent})
	if err != nil || len(etags) != 2 || len(unresolved) != 1 || unresolved[0] != absent {
		t.Errorf("PinnedETags with an absent pin = %v, %v, %v; want 2 blobs and the absent pin unresolved", etags, unresolved, err)
	}
}
