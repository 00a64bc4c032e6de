package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
)

// Eviction keeps the store within MaxBytes, least recently opened first,
// never touches files in use, removes snapshot symlinks with their blobs, and
// serves over budget rather than blocking when everything is in use.
func TestEvictionRespectsBudget(t *testing.T) {
	const mib = 1 << 20
	s := newStore(t, Options{MaxBytes: 5 * mib / 2, ChunkSize: mib / 4})
	files := make([]File, 5)
	origins := make([]*fakeOrigin, 5)
	for i := range files {
		data := genData(mib, byte(20+i))
		files[i] = fileFor(fmt.Sprintf("dir/f%d.bin", i), data)
		origins[i] = &fakeOrigin{data: data}
	}
	exists := func(i int) bool {
		_, err := os.Stat(s.paths.blob(testRepo, files[i].ETag))
		_, lerr := os.Lstat(s.paths.snapshot(testRepo, testCommit, files[i].Path))
		if (err == nil) != (lerr == nil) {
			t.Errorf("file %d: blob err %v but symlink err %v", i, err, lerr)
		}
		return err == nil
	}
	openHeld := func(i int) *Handle {
		h, err := s.Open(context.Background(), files[i], origins[i])
		if err != nil {
			t.Fatal(err)
		}
		h.Expect(0, mib)
		if err := readSeq(h, 0, mib, 64<<10, origins[i].data); err != nil {
			t.Fatal(err)
		}
		settle(s)
		return h
	}

	openRead(t, s, files[0], origins[0])
	openRead(t, s, files[1], origins[1])
	h2 := openHeld(2) // evicts 0, the least recently opened
	if exists(0) || !exists(1) || !exists(2) {
		t.Fatalf("after 3 files: have %v %v %v, want only 1 and 2", exists(0), exists(1), exists(2))
	}
	h3 := openHeld(3) // 2 is held open, so 1 goes
	if exists(1) || !exists(2) || !exists(3) {
		t.Fatalf("after 4 files: have %v %v %v, want 2 and 3", exists(1), exists(2), exists(3))
	}
	if st := s.Stats(); st.BlobBytes+st.PartialBytes > s.opts.MaxBytes || st.Evictions != 2 {
		t.Errorf("Stats = %+v, want within %d bytes after 2 evictions", st, s.opts.MaxBytes)
	}

	// Everything is in use: the fifth file is served over budget.
	h4 := openHeld(4)
	if !exists(2) || !exists(3) || !exists(4) {
		t.Fatal("a held file was evicted")
	}
	h2.Close()
	h3.Close()
	h4.Close()

	// Once released, the next fill brings the store back within budget.
	openRead(t, s, files[0], origins[0])
	if st := s.Stats(); st.BlobBytes+st.PartialBytes > s.opts.MaxBytes {
		t.Errorf("Stats = %+v, want within %d bytes", st, s.opts.MaxBytes)
	}
	if _, _, err := s.Stat(testRepo, testCommit, files[2].Path); !errors.Is(err, ErrNotCached) {
		t.Errorf("Stat of an evicted file = %v, want ErrNotCached", err)
	}
}

// An unreachable free-space floor evicts everything not in use, and reads
// still succeed.
func TestMinFreeBytesEvicts(t *testing.T) {
	s := newStore(t, Options{MinFreeBytes: 1 << 62})
	a, b := genData(200_000, 30), genData(200_000, 31)
	openRead(t, s, fileFor("a", a), &fakeOrigin{data: a})
	openRead(t, s, fileFor("b", b), &fakeOrigin{data: b})
	if st := s.Stats(); st.Blobs != 1 || st.Evictions != 1 {
		t.Errorf("Stats = %+v, want a evicted and b kept", st)
	}
}

// Partials count against the budget by their present bytes and are evicted
// like blobs; an abandoned empty partial leaves nothing behind.
func TestPartialsEvicted(t *testing.T) {
	const mib = 1 << 20
	s := newStore(t, Options{MaxBytes: mib})
	a, b := genData(4*mib, 32), genData(mib/2, 33)
	fa, fb := fileFor("a", a), fileFor("b", b)
	ha, err := s.Open(context.Background(), fa, &fakeOrigin{data: a})
	if err != nil {
		t.Fatal(err)
	}
	ha.Expect(0, 3*mib/4)
	if err := readSeq(ha, 0, 3*mib/4, 32<<10, a); err != nil {
		t.Fatal(err)
	}
	ha.Close()
	settle(s)
	if st := s.Stats(); st.Partials != 1 || st.PartialBytes != 3*mib/4 {
		t.Fatalf("Stats = %+v, want a partial of 3/4 MiB", st)
	}
	openRead(t, s, fb, &fakeOrigin{data: b})
	if _, err := os.Stat(s.paths.partialData(testRepo, fa.ETag)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("evicted partial still on disk: %v", err)
	}
	if st := s.Stats(); st.Partials != 0 || st.Blobs != 1 {
		t.Errorf("Stats = %+v, want only b", st)
	}

	// Opened and closed without a read: no partial is left.
	c := genData(1000, 34)
	hc, err := s.Open(context.Background(), fileFor("c", c), &fakeOrigin{data: c})
	if err != nil {
		t.Fatal(err)
	}
	hc.Close()
	if _, err := os.Stat(s.paths.partialData(testRepo, sha256Hex(c))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty partial left on disk: %v", err)
	}
}
