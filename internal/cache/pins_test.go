package cache

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

func TestParsePin(t *testing.T) {
	for in, want := range map[string]string{
		"org/model":                  "org/model",
		"gpt2":                       "gpt2",
		"org/model@main":             "org/model@main",
		"datasets/org/data@v1.0":     "datasets/org/data@v1.0",
		"spaces/org/app":             "spaces/org/app",
		"models/org/model@refs/pr/3": "org/model@refs/pr/3",
	} {
		p, err := ParsePin(in)
		if err != nil || p.String() != want {
			t.Errorf("ParsePin(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, in := range []string{"", "org/../x", "things/org/m", "org/m@", "org/m@bad rev", "a/b/c/d"} {
		if p, err := ParsePin(in); err == nil {
			t.Errorf("ParsePin(%q) = %v, want an error", in, p)
		}
	}
}

// pinFiles is n files of 1 MiB in repo at commit, with their origins.
func pinFiles(repo hub.Repo, commit string, n int, seed byte) ([]File, []*fakeOrigin) {
	files := make([]File, n)
	origins := make([]*fakeOrigin, n)
	for i := range files {
		data := genData(1<<20, seed+byte(i))
		files[i] = File{Repo: repo, Commit: commit, Path: fmt.Sprintf("f%d.bin", i), ETag: sha256Hex(data), Size: int64(len(data))}
		origins[i] = &fakeOrigin{data: data}
	}
	return files, origins
}

// A pinned repo's files stay however much else passes through a cache far
// smaller than the traffic; an unpinned repo's go, least recently used
// first, as before.
func TestPinnedRepoIsNeverEvicted(t *testing.T) {
	pinned := hub.MustRepo(hub.Model, "org/keep")
	s := newStore(t, Options{MaxBytes: 3 << 20, ChunkSize: 256 << 10, Pins: []Pin{{Repo: pinned}}})
	keep, keepO := pinFiles(pinned, testCommit, 2, 1)
	for i := range keep {
		openRead(t, s, keep[i], keepO[i])
	}
	other, otherO := pinFiles(testRepo, testCommit, 6, 50)
	for i := range other {
		openRead(t, s, other[i], otherO[i])
	}
	settle(s)
	for _, f := range keep {
		if _, err := os.Stat(s.paths.blob(pinned, f.ETag)); err != nil {
			t.Errorf("pinned %s was evicted: %v", f.Path, err)
		}
	}
	if st := s.Stats(); st.Evictions < 5 || st.BlobBytes > 3<<20 {
		t.Errorf("Stats = %+v: want the other repo evicted down to the budget", st)
	}
}

// A pin at a branch, recorded by `hubproxy cache pin` in a running cache,
// keeps the files of the commit the branch names; when the branch moves, the
// files only the old commit had are no longer pinned.
func TestPinAtABranchFollowsIt(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1e9, 0))
	s := newStoreHooks(t, Options{MaxBytes: 3 << 20, ChunkSize: 256 << 10}, testHooks{now: clock.Now})
	old, next := strings.Repeat("a", 40), strings.Repeat("b", 40)
	if err := WritePins(s.paths.root, []Pin{{Repo: testRepo, Rev: "main"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteRef(testRepo, "main", old); err != nil {
		t.Fatal(err)
	}
	oldFiles, oldO := pinFiles(testRepo, old, 2, 1)
	for i := range oldFiles {
		openRead(t, s, oldFiles[i], oldO[i])
	}
	filler := hub.MustRepo(hub.Model, "org/filler")
	fill, fillO := pinFiles(filler, testCommit, 4, 90)
	for i := range fill {
		openRead(t, s, fill[i], fillO[i])
	}
	settle(s)
	for _, f := range oldFiles {
		if _, err := os.Stat(s.paths.blob(testRepo, f.ETag)); err != nil {
			t.Fatalf("%s of the pinned branch was evicted: %v", f.Path, err)
		}
	}
	// The branch moves; the old commit's files are fair game.
	if err := s.WriteRef(testRepo, "main", next); err != nil {
		t.Fatal(err)
	}
	clock.Advance(1100 * time.Millisecond) // the index is rebuilt at most once a second
	more, moreO := pinFiles(filler, testCommit, 4, 120)
	for i := range more {
		openRead(t, s, more[i], moreO[i])
	}
	settle(s)
	gone := 0
	for _, f := range oldFiles {
		if _, err := os.Stat(s.paths.blob(testRepo, f.ETag)); err != nil {
			gone++
		}
	}
	if gone == 0 {
		t.Error("the old commit's files are still kept after the branch moved")
	}
}
