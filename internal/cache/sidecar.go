package cache

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// sidecarVersion is the format version of sidecar files.
const sidecarVersion = 1

// sidecar is the JSON saved next to a partial's data file. It is untrusted
// on load: every field is validated before it names a file or a range.
type sidecar struct {
	Version   int          `json:"version"`
	RepoType  hub.RepoType `json:"repo_type"`
	RepoID    string       `json:"repo_id"`
	Commit    string       `json:"commit"` // the first (commit, path) the file was opened as
	Path      string       `json:"path"`
	ETag      string       `json:"etag"`
	Size      int64        `json:"size"`
	BlockSize int64        `json:"block_size"`
	Present   ranges.Set   `json:"present"` // whole blocks durably written
	Links     []link       `json:"links,omitempty"`
}

// file validates the sidecar and returns the File it describes.
func (sc *sidecar) file() (File, error) {
	if sc.Version != sidecarVersion {
		return File{}, fmt.Errorf("sidecar version %d", sc.Version)
	}
	repo, err := hub.ParseRepo(sc.RepoType, sc.RepoID)
	if err != nil {
		return File{}, err
	}
	f := File{Repo: repo, Commit: sc.Commit, Path: sc.Path, ETag: sc.ETag, Size: sc.Size}
	if err := validFile(f); err != nil {
		return File{}, err
	}
	if f.Size == 0 {
		return File{}, fmt.Errorf("sidecar for an empty file")
	}
	for _, l := range sc.Links {
		if !hub.IsCommit(l.Commit) || hub.ValidPath(l.Path) != nil {
			return File{}, fmt.Errorf("sidecar link %q at %q", l.Path, l.Commit)
		}
	}
	return f, nil
}

// saveSidecar records the item's present ranges. The data file is fsynced
// first, so the sidecar never claims bytes that a crash could lose; the
// sidecar itself is written to a temp file and renamed. Saves that would not
// change anything are skipped.
func (s *Store) saveSidecar(it *item) {
	it.saveMu.Lock()
	defer it.saveMu.Unlock()
	it.mu.Lock()
	if (it.state != statePartial && it.state != statePromoting) || it.file == nil || len(it.links) == 0 {
		it.mu.Unlock()
		return
	}
	present := it.present.Clone()
	links := slices.Clone(it.links)
	file := it.file
	it.mu.Unlock()
	if present.Size() == it.savedSize && len(links) == it.savedLink {
		return
	}
	if err := file.Sync(); err != nil {
		s.log.Warn("cache: fsync partial", "path", it.dataPath, "err", err)
		return
	}
	b, err := json.Marshal(sidecar{
		Version:   sidecarVersion,
		RepoType:  it.key.repo.Type(),
		RepoID:    it.key.repo.ID(),
		Commit:    links[0].Commit,
		Path:      links[0].Path,
		ETag:      it.key.etag,
		Size:      it.size,
		BlockSize: it.blockSize,
		Present:   present,
		Links:     links,
	})
	if err == nil {
		err = writeFileAtomic(s.paths.tmp(), it.sidecarPath, b)
	}
	if err != nil {
		s.log.Warn("cache: saving sidecar", "path", it.sidecarPath, "err", err)
		return
	}
	it.savedSize, it.savedLink = present.Size(), len(links)
}
