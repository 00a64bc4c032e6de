package cache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// danglingLinks lists the symlinks under the store's repos whose target does
// not exist.
func danglingLinks(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(s.paths.root, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".hubproxy" {
			return filepath.SkipDir
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if _, err := os.Stat(name); err != nil {
				out = append(out, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tmpLeft lists what is left in the store's tmp/.
func tmpLeft(t *testing.T, s *Store) []string {
	t.Helper()
	ents, err := os.ReadDir(s.paths.tmp())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// checkClean fails the test if eviction left dangling links or files in tmp/.
func checkClean(t *testing.T, s *Store) {
	t.Helper()
	if d := danglingLinks(t, s); len(d) > 0 {
		t.Errorf("dangling snapshot links: %v", d)
	}
	if left := tmpLeft(t, s); len(left) > 0 {
		t.Errorf("left in tmp/: %v", left)
	}
}

// pauseFirstBatch returns a janitorBatch hook that stops the janitor on its
// first batch: entered is closed when it gets there, and it goes on once
// release is closed. Later batches pass.
func pauseFirstBatch() (hook func(), entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook = func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	return hook, entered, release
}

// Evicting many blobs of one repo in one pass walks the repo's snapshots
// once, not once per blob, and removes every link to them, huggingface_hub's
// own included, while links to blobs that stay are kept.
func TestEvictionWalksSnapshotsOncePerPass(t *testing.T) {
	const n, size = 20, 1000
	s := newStore(t, Options{MaxBytes: n*size + size/2})
	var files []File
	for i := range n {
		data := genData(size, byte(100+i))
		f := fileFor(fmt.Sprintf("dir%d/f%d.bin", i%3, i), data)
		openRead(t, s, f, &fakeOrigin{data: data})
		files = append(files, f)
	}
	// A link huggingface_hub made, at another commit, to the first blob.
	other := strings.Repeat("d", 40)
	hfLink := s.paths.snapshot(testRepo, other, files[0].Path)
	if err := os.MkdirAll(filepath.Dir(hfLink), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(linkTarget(files[0].Path, files[0].ETag), hfLink); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Blobs != n || st.Evictions != 0 || s.jan.walks.Load() != 0 {
		t.Fatalf("Stats = %+v, walks %d; want %d blobs and nothing evicted yet", st, s.jan.walks.Load(), n)
	}

	// One fill that needs the whole budget evicts all of them in one pass.
	big := genData(n*size, 99)
	fb := fileFor("big.bin", big)
	openRead(t, s, fb, &fakeOrigin{data: big})
	if st := s.Stats(); st.Evictions != n || st.Blobs != 1 {
		t.Fatalf("Stats = %+v, want %d evictions and one blob left", st, n)
	}
	if w := s.jan.walks.Load(); w < 1 || w > 2 {
		t.Errorf("evicting %d blobs of one repo walked its snapshots %d times, want once", n, w)
	}
	for _, f := range files {
		for _, name := range []string{s.paths.blob(testRepo, f.ETag), s.paths.snapshot(testRepo, testCommit, f.Path)} {
			if _, err := os.Lstat(name); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s left after eviction (err %v)", name, err)
			}
		}
	}
	if _, err := os.Lstat(hfLink); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("huggingface_hub's link to an evicted blob left (err %v)", err)
	}
	if b, err := os.ReadFile(s.paths.snapshot(testRepo, testCommit, fb.Path)); err != nil || string(b) != string(big) {
		t.Errorf("the link of the blob kept does not read back (err %v)", err)
	}
	checkClean(t, s)
}

// Eviction does no disk walk under Store.mu: while the janitor is paused
// with an evicted blob's links still to remove, another file opens, reads
// and closes, and the fill that evicted finishes.
func TestEvictionLeavesDiskWorkOffTheLock(t *testing.T) {
	const size = 300_000
	hook, entered, release := pauseFirstBatch()
	s := newStoreHooks(t, Options{MaxBytes: size + size/2}, testHooks{janitorBatch: hook})
	a, b, c := genData(size, 40), genData(size, 41), genData(1000, 42)
	fa, fb, fc := fileFor("a.bin", a), fileFor("sub/b.bin", b), fileFor("c.bin", c)
	openRead(t, s, fa, &fakeOrigin{data: a})

	// Reading b evicts a; its fill goes on while the janitor is paused.
	bDone := make(chan error, 1)
	go func() {
		h, err := s.Open(context.Background(), fb, &fakeOrigin{data: b})
		if err != nil {
			bDone <- err
			return
		}
		defer h.Close()
		h.Expect(0, size)
		bDone <- readSeq(h, 0, size, 32<<10, b)
	}()
	defer close(release) // lets a broken implementation unwind
	waitChan(t, entered, "the janitor to take the eviction")

	cDone := make(chan error, 1)
	go func() {
		h, err := s.Open(context.Background(), fc, &fakeOrigin{data: c})
		if err != nil {
			cDone <- err
			return
		}
		err = readSeq(h, 0, int64(len(c)), 1000, c)
		h.Close()
		cDone <- err
	}()
	if err := waitChan(t, cDone, "Open/read/Close of another file while the janitor is paused"); err != nil {
		t.Fatal(err)
	}
	if err := waitChan(t, bDone, "the read whose fill evicted"); err != nil {
		t.Fatal(err)
	}

	// a's blob is already out of blobs/, waiting in tmp/ under a name that
	// records what is left to do; its link is not removed yet.
	if _, err := os.Stat(s.paths.blob(testRepo, fa.ETag)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("evicted blob still in blobs/ (err %v)", err)
	}
	if left := tmpLeft(t, s); len(left) != 1 {
		t.Errorf("tmp/ holds %v, want the evicted blob", left)
	} else if repo, etag, ok := parseEvicted(left[0]); !ok || repo != testRepo || etag != fa.ETag {
		t.Errorf("evicted blob is in tmp/ as %q, which does not name its repo and etag", left[0])
	}
	if _, err := os.Lstat(s.paths.snapshot(testRepo, testCommit, fa.Path)); err != nil {
		t.Errorf("link removed while the janitor was paused: %v", err)
	}
	if _, _, err := s.Stat(testRepo, testCommit, fa.Path); !errors.Is(err, ErrNotCached) {
		t.Errorf("Stat of the evicted file = %v, want ErrNotCached", err)
	}

	release <- struct{}{} // the deferred close does the rest
	settle(s)
	if st := s.Stats(); st.Evictions != 1 {
		t.Errorf("Stats = %+v, want one eviction", st)
	}
	if _, err := os.Lstat(s.paths.snapshot(testRepo, testCommit, fa.Path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("link of the evicted blob left (err %v)", err)
	}
	checkClean(t, s)
}

// A blob evicted and then fetched and promoted again before the janitor ran
// keeps its snapshot link: the janitor removes only links that dangle.
func TestJanitorKeepsLinksOfRepromotedBlob(t *testing.T) {
	const size = 200_000
	hook, entered, release := pauseFirstBatch()
	s := newStoreHooks(t, Options{MaxBytes: 2*size + size/2}, testHooks{janitorBatch: hook})
	a, b, c := genData(size, 43), genData(size, 44), genData(size, 45)
	fa, fb, fc := fileFor("a.bin", a), fileFor("b.bin", b), fileFor("c.bin", c)
	openRead(t, s, fa, &fakeOrigin{data: a})
	openRead(t, s, fb, &fakeOrigin{data: b})

	// c evicts a, and the janitor stops with a's links in its batch.
	readDone := make(chan error, 1)
	go func() {
		h, err := s.Open(context.Background(), fc, &fakeOrigin{data: c})
		if err != nil {
			readDone <- err
			return
		}
		defer h.Close()
		h.Expect(0, size)
		readDone <- readSeq(h, 0, size, 32<<10, c)
	}()
	defer close(release)
	waitChan(t, entered, "the janitor to take the eviction")
	if err := waitChan(t, readDone, "the read that evicted"); err != nil {
		t.Fatal(err)
	}

	// a comes back (evicting b), is promoted and linked again.
	h, err := s.Open(context.Background(), fa, &fakeOrigin{data: a})
	if err != nil {
		t.Fatal(err)
	}
	h.Expect(0, size)
	if err := readSeq(h, 0, size, 32<<10, a); err != nil {
		t.Fatal(err)
	}
	h.Close()
	s.wg.Wait() // fills and promotion; the janitor is still paused

	release <- struct{}{}
	settle(s)
	if st := s.Stats(); st.Evictions != 2 || st.Promotions != 4 {
		t.Errorf("Stats = %+v, want 2 evictions and 4 promotions", st)
	}
	got, err := os.ReadFile(s.paths.snapshot(testRepo, testCommit, fa.Path))
	if err != nil || string(got) != string(a) {
		t.Errorf("the link of the promoted-again blob does not read back (err %v)", err)
	}
	if _, err := os.Lstat(s.paths.snapshot(testRepo, testCommit, fb.Path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("link of the evicted blob left (err %v)", err)
	}
	checkClean(t, s)
}

// Close waits for the janitor's pending work, and a handle closed after the
// store still removes its empty partial: nothing is left in tmp/, no link
// dangles, and no janitor goroutine outlives Close.
func TestCloseFinishesJanitorWork(t *testing.T) {
	const size = 300_000
	hook, entered, release := pauseFirstBatch()
	s := newStoreHooks(t, Options{MaxBytes: size + size/2}, testHooks{janitorBatch: hook})
	a, b := genData(size, 46), genData(size, 47)
	c, d := genData(1000, 48), genData(1000, 49)
	fa, fb, fc, fd := fileFor("a.bin", a), fileFor("b.bin", b), fileFor("c.bin", c), fileFor("d.bin", d)
	openRead(t, s, fa, &fakeOrigin{data: a})

	readDone := make(chan error, 1)
	go func() {
		h, err := s.Open(context.Background(), fb, &fakeOrigin{data: b})
		if err != nil {
			readDone <- err
			return
		}
		defer h.Close()
		h.Expect(0, size)
		readDone <- readSeq(h, 0, size, 32<<10, b)
	}()
	defer close(release)
	waitChan(t, entered, "the janitor to take the eviction")
	if err := waitChan(t, readDone, "the read that evicted"); err != nil {
		t.Fatal(err)
	}
	s.wg.Wait()

	// More work queues behind the paused batch: an empty partial, opened
	// and closed without a read.
	hc, err := s.Open(context.Background(), fc, &fakeOrigin{data: c})
	if err != nil {
		t.Fatal(err)
	}
	hc.Close()
	// Another stays open across Close.
	hd, err := s.Open(context.Background(), fd, &fakeOrigin{data: d})
	if err != nil {
		t.Fatal(err)
	}

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	release <- struct{}{}
	if err := waitChan(t, closed, "Close"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s.mu.Lock()
	running, queued := s.jan.running, !s.takeJanitorBatchLocked().empty()
	s.mu.Unlock()
	if running || queued {
		t.Errorf("after Close: janitor running %v, work queued %v", running, queued)
	}
	if _, err := os.Lstat(s.paths.snapshot(testRepo, testCommit, fa.Path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("link of the evicted blob left (err %v)", err)
	}
	checkClean(t, s)

	hd.Close()
	checkClean(t, s)
	for _, f := range []File{fc, fd} {
		if _, err := os.Stat(s.paths.partialData(testRepo, f.ETag)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("empty partial %s left (err %v)", f.Path, err)
		}
	}
}

// A process that dies after evicting a blob but before its janitor ran
// leaves the blob in tmp/; the next Open removes it and the snapshot links
// that dangle without it, and only those.
func TestOpenFinishesInterruptedEviction(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, Options{Dir: dir})
	a, b := genData(1000, 50), genData(1000, 51)
	fa, fb := fileFor("a.bin", a), fileFor("sub/b.bin", b)
	openRead(t, s, fa, &fakeOrigin{data: a})
	openRead(t, s, fb, &fakeOrigin{data: b})
	hfLink := s.paths.snapshot(testRepo, strings.Repeat("d", 40), fa.Path)
	if err := os.MkdirAll(filepath.Dir(hfLink), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(linkTarget(fa.Path, fa.ETag), hfLink); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// What removeLocked leaves behind for the janitor, and a temp file.
	if err := os.Rename(s.paths.blob(testRepo, fa.ETag), filepath.Join(s.paths.tmp(), "7-"+evictedBlob(testRepo, fa.ETag))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.paths.tmp(), "w-123"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	s2 := newStore(t, Options{Dir: dir})
	for _, name := range []string{hfLink, s.paths.snapshot(testRepo, testCommit, fa.Path)} {
		if _, err := os.Lstat(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("link to the evicted blob left: %s (err %v)", name, err)
		}
	}
	if got, err := os.ReadFile(s2.paths.snapshot(testRepo, testCommit, fb.Path)); err != nil || string(got) != string(b) {
		t.Errorf("the link of the blob kept does not read back (err %v)", err)
	}
	if st := s2.Stats(); st.Blobs != 1 {
		t.Errorf("Stats = %+v, want one blob", st)
	}
	checkClean(t, s2)
}
