package cachemaint

import (
	"cmp"
	"slices"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Entry is one stored file: a verified blob or a partial being filled.
type Entry struct {
	Repo       hub.Repo
	ETag       string
	Partial    bool
	Size       int64     // the file's full size
	Bytes      int64     // what it holds on disk: Size for a blob, present bytes for a partial
	LastAccess time.Time // blobs: the later of access and modification time; partials: last write
}

// RepoUsage sums one repository's share of a cache directory.
type RepoUsage struct {
	Repo         hub.Repo
	Blobs        int
	BlobBytes    int64
	Partials     int
	PartialBytes int64 // bytes present in partial files
	Snapshots    int   // commits with a snapshots/ folder
	LastAccess   time.Time
}

// List returns every blob and partial under dir, sorted by repo and ETag.
func List(dir string) ([]Entry, error) {
	inv, err := scan(dir)
	if err != nil {
		return nil, err
	}
	return inv.entries, nil
}

// Usage sums List per repository, sorted by repo; repos holding nothing but
// snapshot folders or refs are included with zero bytes.
func Usage(dir string) ([]RepoUsage, error) {
	inv, err := scan(dir)
	if err != nil {
		return nil, err
	}
	byRepo := map[hub.Repo]*RepoUsage{}
	get := func(r hub.Repo) *RepoUsage {
		if byRepo[r] == nil {
			byRepo[r] = &RepoUsage{Repo: r}
		}
		return byRepo[r]
	}
	for r, n := range inv.snapshots {
		get(r).Snapshots = n
	}
	for _, e := range inv.entries {
		u := get(e.Repo)
		if e.Partial {
			u.Partials++
			u.PartialBytes += e.Bytes
		} else {
			u.Blobs++
			u.BlobBytes += e.Bytes
		}
		if e.LastAccess.After(u.LastAccess) {
			u.LastAccess = e.LastAccess
		}
	}
	out := make([]RepoUsage, 0, len(byRepo))
	for _, u := range byRepo {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b RepoUsage) int { return cmp.Compare(a.Repo.String(), b.Repo.String()) })
	return out, nil
}
