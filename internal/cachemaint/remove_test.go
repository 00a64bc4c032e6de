package cachemaint

import (
	"context"
	"errors"
	"testing"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// TestRemoveWholeRepo removes a repo's blobs, partials and folder, and
// nothing of another repo; a dry run first removes nothing.
func TestRemoveWholeRepo(t *testing.T) {
	dir := t.TempDir()
	files := fillCache(t, dir, genData(10_000, 1), genData(20_000, 2))
	p := cache.NewLayout(dir)

	// A partial of testRepo, and a blob of another repo.
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
	other := hub.MustRepo(hub.Dataset, "org/other")
	odata := genData(5_000, 9)
	of := cache.File{Repo: other, Commit: testCommit, Path: "o.bin", ETag: sha256Hex(odata), Size: int64(len(odata))}
	openRead(t, s, of, &origin{data: odata})
	s.Close()

	rep, err := Remove(context.Background(), dir, testRepo, "", true)
	if err != nil || len(rep.Blobs) != 3 || !rep.WholeDir || len(rep.Commits) != 1 {
		t.Fatalf("dry run: %+v, %v", rep, err)
	}
	if !exists(p.Blob(testRepo, files[0].ETag)) || !exists(p.PartialData(pf.Repo, pf.ETag)) {
		t.Fatal("a dry run removed files")
	}
	if rep, err = Remove(context.Background(), dir, testRepo, "", false); err != nil || rep.Bytes != 30_000+8<<10 {
		t.Fatalf("remove: %+v, %v", rep, err)
	}
	switch {
	case exists(p.Repo(testRepo)):
		t.Error("the repo's folder is still there")
	case exists(p.PartialData(pf.Repo, pf.ETag)) || exists(p.Sidecar(pf.Repo, pf.ETag)):
		t.Error("the repo's partial is still there")
	case !exists(p.Blob(other, of.ETag)):
		t.Error("another repo's blob went too")
	}
	if _, err := Remove(context.Background(), dir, testRepo, "", false); !errors.Is(err, ErrNotCached) {
		t.Errorf("remove of a repo no longer cached: %v", err)
	}
}
