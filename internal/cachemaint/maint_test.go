package cachemaint

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// fillCache stores each data as a complete blob of testRepo (the first as a
// git-sha1 file, the rest sha256) and returns their Files. The store is
// closed before returning, as the admin functions run on a quiet tree.
func fillCache(t *testing.T, dir string, datas ...[]byte) []cache.File {
	t.Helper()
	s := newStore(t, cache.Options{Dir: dir, BlockSize: 4 << 10, ChunkSize: 64 << 10})
	var files []cache.File
	for i, data := range datas {
		f := fileFor("f"+string(rune('a'+i))+".bin", data)
		if i == 0 {
			f.ETag = gitSHA1Hex(data)
		}
		openRead(t, s, f, &origin{data: data})
		files = append(files, f)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return files
}

// age sets a blob's access and modification times.
func age(t *testing.T, l cache.Layout, f cache.File, when time.Time) {
	t.Helper()
	if err := os.Chtimes(l.Blob(f.Repo, f.ETag), when, when); err != nil {
		t.Fatal(err)
	}
}

func exists(name string) bool {
	_, err := os.Lstat(name)
	return err == nil
}

func TestVerifyFindsAndFixesCorruptBlob(t *testing.T) {
	dir := t.TempDir()
	files := fillCache(t, dir, genData(10_000, 1), genData(70_000, 2), genData(33_000, 3))
	p := cache.NewLayout(dir)

	rep, err := Verify(context.Background(), dir, VerifyOptions{})
	if err != nil || rep.Checked != 3 || len(rep.Corrupt) != 0 || rep.Bytes != 113_000 {
		t.Fatalf("clean cache: %+v, %v", rep, err)
	}

	// Flip one byte of each hash kind; keep the size, so only hashing can tell.
	for _, f := range files[:2] {
		name := p.Blob(f.Repo, f.ETag)
		b, _ := os.ReadFile(name)
		b[len(b)/2] ^= 0x01
		os.WriteFile(name, b, 0o644)
	}
	old := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	age(t, p, files[2], old)

	var seen int
	rep, err = Verify(context.Background(), dir, VerifyOptions{Progress: func(Entry, bool) { seen++ }})
	if err != nil || rep.Checked != 3 || seen != 3 || len(rep.Corrupt) != 2 {
		t.Fatalf("corrupt cache: %+v, %v (progress calls %d)", rep, err, seen)
	}
	for _, c := range rep.Corrupt {
		if c.ETag != files[0].ETag && c.ETag != files[1].ETag || c.Got == c.ETag || c.Got == "" || c.Removed {
			t.Errorf("corrupt entry %+v", c)
		}
		if !exists(p.Blob(c.Repo, c.ETag)) {
			t.Errorf("verify without Fix deleted %s", c.ETag)
		}
	}
	if info, err := os.Stat(p.Blob(files[2].Repo, files[2].ETag)); err == nil {
		if at, ok := accessTime(info); ok && !at.Equal(old) {
			t.Errorf("verify left the access time at %v, want it restored to %v", at, old)
		}
	}

	rep, err = Verify(context.Background(), dir, VerifyOptions{Fix: true, Workers: 1})
	if err != nil || len(rep.Corrupt) != 2 || !rep.Corrupt[0].Removed {
		t.Fatalf("fix: %+v, %v", rep, err)
	}
	for i, f := range files {
		blob, link := exists(p.Blob(f.Repo, f.ETag)), exists(p.Snapshot(f.Repo, f.Commit, f.Path))
		if want := i == 2; blob != want || link != want {
			t.Errorf("file %d after fix: blob %v, link %v; want %v", i, blob, link, want)
		}
	}
	if rep, err := Verify(context.Background(), dir, VerifyOptions{}); err != nil || rep.Checked != 1 || len(rep.Corrupt) != 0 {
		t.Errorf("after fix: %+v, %v", rep, err)
	}

	// The store reopens on the fixed tree and refetches the removed file.
	s := newStore(t, cache.Options{Dir: dir})
	data := genData(70_000, 2)
	openRead(t, s, files[1], &origin{data: data})
	if st := s.Stats(); st.Blobs != 2 {
		t.Errorf("after refetch: %+v", st)
	}
}

func TestVerifyHonoursContext(t *testing.T) {
	dir := t.TempDir()
	fillCache(t, dir, genData(1000, 1), genData(1000, 2))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Verify(ctx, dir, VerifyOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Verify with a cancelled context: %v", err)
	}
}

// TestPruneFreesToTarget ages four blobs and a partial, then prunes to a
// byte target: the least recently used go first, and no more than needed.
func TestPruneFreesToTarget(t *testing.T) {
	dir := t.TempDir()
	const n = 50_000
	files := fillCache(t, dir, genData(n, 1), genData(n, 2), genData(n, 3), genData(n, 4))
	p := cache.NewLayout(dir)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	order := []int{2, 0, 3, 1} // oldest first
	for rank, i := range order {
		age(t, p, files[i], now.Add(-time.Duration(10-rank)*time.Hour))
	}

	// A partial: the first blocks of a fifth file, last written long ago.
	s := newStore(t, cache.Options{Dir: dir, BlockSize: 4 << 10})
	pdata := genData(100_000, 5)
	pf := fileFor("partial.bin", pdata)
	h, err := s.Open(context.Background(), pf, &origin{data: pdata})
	if err != nil {
		t.Fatal(err)
	}
	if err := readSeq(h, 0, 8<<10, 4<<10, pdata); err != nil {
		t.Fatal(err)
	}
	h.Close()
	s.Close()
	old := now.Add(-20 * time.Hour)
	os.Chtimes(p.PartialData(pf.Repo, pf.ETag), old, old)
	os.Chtimes(p.Sidecar(pf.Repo, pf.ETag), old, old)

	usage, err := Usage(dir)
	if err != nil || len(usage) != 1 || usage[0].Blobs != 4 || usage[0].BlobBytes != 4*n || usage[0].Partials != 1 ||
		usage[0].PartialBytes < 8<<10 || usage[0].Snapshots != 1 {
		t.Fatalf("usage = %+v, %v", usage, err)
	}
	partialBytes := usage[0].PartialBytes

	// Dry run first: the same report, nothing removed.
	target := int64(2*n + 1000)
	dry, err := Prune(context.Background(), dir, PruneOptions{MaxBytes: target, Now: now, DryRun: true})
	if err != nil || len(dry.Removed) != 3 {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	for _, f := range files {
		if !exists(p.Blob(f.Repo, f.ETag)) {
			t.Fatal("dry run removed a blob")
		}
	}

	rep, err := Prune(context.Background(), dir, PruneOptions{MaxBytes: target, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Before != 4*n+partialBytes || rep.After > target || rep.After != 2*n || rep.Freed != 2*n+partialBytes || rep.Over {
		t.Errorf("report: before %d after %d freed %d over %v (target %d)", rep.Before, rep.After, rep.Freed, rep.Over, target)
	}
	if len(rep.Removed) != 3 || !rep.Removed[0].Partial || rep.Removed[1].ETag != files[2].ETag || rep.Removed[2].ETag != files[0].ETag {
		t.Errorf("removed %+v; want the partial, then files 2 and 0", rep.Removed)
	}
	for i, f := range files {
		want := i == 1 || i == 3
		if exists(p.Blob(f.Repo, f.ETag)) != want || exists(p.Snapshot(f.Repo, f.Commit, f.Path)) != want {
			t.Errorf("file %d: blob/link present %v, want %v", i, !want, want)
		}
	}
	if exists(p.PartialData(pf.Repo, pf.ETag)) || exists(p.Sidecar(pf.Repo, pf.ETag)) {
		t.Error("the partial survived")
	}
	if usage, _ := Usage(dir); len(usage) != 1 || usage[0].BlobBytes+usage[0].PartialBytes != rep.After {
		t.Errorf("usage after prune = %+v, report says %d", usage, rep.After)
	}

	// Everything older than 7.5h goes (file 3 at -8h, not file 1 at -7h); then the repo empties
	// and its folder goes too.
	rep, err = Prune(context.Background(), dir, PruneOptions{OlderThan: 7*time.Hour + 30*time.Minute, Now: now})
	if err != nil || len(rep.Removed) != 1 || rep.Removed[0].ETag != files[3].ETag || rep.Removed[0].Reason != "older-than" {
		t.Errorf("older-than: %+v, %v", rep, err)
	}
	if _, err := Prune(context.Background(), dir, PruneOptions{OlderThan: time.Hour, Now: now}); err != nil {
		t.Fatal(err)
	}
	if exists(p.Repo(testRepo)) {
		t.Error("an emptied repo folder was kept")
	}
	s = newStore(t, cache.Options{Dir: dir})
	if st := s.Stats(); st.Blobs != 0 || st.Partials != 0 {
		t.Errorf("store after pruning everything: %+v", st)
	}
}

func TestPruneOrphansAndRecentPartials(t *testing.T) {
	dir := t.TempDir()
	fillCache(t, dir, genData(1000, 1))
	p := cache.NewLayout(dir)
	now := time.Now()
	oldOrphan := filepath.Join(p.PartialDir(), "models--org--model--"+sha256Hex([]byte("x")))
	newOrphan := filepath.Join(p.PartialDir(), "models--org--model--"+sha256Hex([]byte("y")))
	oldTmp := filepath.Join(p.TmpDir(), "w-123")
	for _, name := range []string{oldOrphan, newOrphan, oldTmp} {
		if err := os.WriteFile(name, make([]byte, 100), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{oldOrphan, oldTmp} {
		os.Chtimes(name, now.Add(-2*time.Hour), now.Add(-2*time.Hour))
	}
	rep, err := Prune(context.Background(), dir, PruneOptions{Now: now})
	if err != nil || len(rep.Removed) != 2 || rep.Freed != 200 || rep.Removed[0].Reason != "orphan" {
		t.Fatalf("orphans: %+v, %v", rep, err)
	}
	if exists(oldOrphan) || exists(oldTmp) || !exists(newOrphan) {
		t.Errorf("old orphan %v, old tmp %v, recent orphan %v", exists(oldOrphan), exists(oldTmp), exists(newOrphan))
	}
	if _, err := Prune(context.Background(), dir, PruneOptions{MaxBytes: -1}); err == nil {
		t.Error("negative MaxBytes accepted")
	}
	os.WriteFile(p.VersionFile(), []byte("99"), 0o644)
	if _, err := Prune(context.Background(), dir, PruneOptions{}); err == nil {
		t.Error("pruned a tree of another layout version")
	}
}

func TestListAndUsageOnPlainHFCache(t *testing.T) {
	// A huggingface_hub cache with no .hubproxy/ at all.
	dir := t.TempDir()
	data := genData(500, 7)
	repo := hub.MustRepo(hub.Dataset, "org/data")
	p := cache.NewLayout(dir)
	os.MkdirAll(filepath.Dir(p.Blob(repo, sha256Hex(data))), 0o755)
	os.WriteFile(p.Blob(repo, sha256Hex(data)), data, 0o644)
	os.WriteFile(p.Blob(repo, sha256Hex(data))+".incomplete", data[:10], 0o644)
	os.MkdirAll(filepath.Join(p.Repo(repo), "snapshots", testCommit), 0o755)
	os.Symlink("../../blobs/"+sha256Hex(data), p.Snapshot(repo, testCommit, "x.bin"))

	es, err := List(dir)
	if err != nil || len(es) != 1 || es[0].Repo != repo || es[0].Bytes != 500 || es[0].Partial {
		t.Fatalf("List = %+v, %v", es, err)
	}
	rep, err := Verify(context.Background(), dir, VerifyOptions{})
	if err != nil || rep.Checked != 1 || len(rep.Corrupt) != 0 {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
	if _, err := List(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("List of a missing dir: %v", err)
	}
}

// A prune would delete files from under a running server's accounting, so
// it refuses a directory a Store holds, and runs once it is closed.
func TestPruneRefusedUnderLiveStore(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, cache.Options{Dir: dir})
	if _, err := Prune(t.Context(), dir, PruneOptions{MaxBytes: 1}); !errors.Is(err, cache.ErrLocked) {
		t.Fatalf("prune under a live store: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Prune(t.Context(), dir, PruneOptions{MaxBytes: 1}); err != nil {
		t.Fatalf("prune after the store closed: %v", err)
	}
}
