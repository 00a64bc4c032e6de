package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// paths computes every file name the store uses. All inputs are validated
// before they reach here (validFile, hub.ValidRevision), so joining is safe.
type paths struct {
	root string
}

func (p paths) state() string   { return filepath.Join(p.root, ".hubproxy") }
func (p paths) partial() string { return filepath.Join(p.state(), "partial") }
func (p paths) meta() string    { return filepath.Join(p.state(), "meta") }
func (p paths) tmp() string     { return filepath.Join(p.state(), "tmp") }
func (p paths) version() string { return filepath.Join(p.state(), "version") }

func (p paths) repo(r hub.Repo) string { return filepath.Join(p.root, r.CacheDir()) }

func (p paths) blob(r hub.Repo, etag string) string {
	return filepath.Join(p.repo(r), "blobs", etag)
}

func (p paths) snapshot(r hub.Repo, commit, path string) string {
	return filepath.Join(p.repo(r), "snapshots", commit, filepath.FromSlash(path))
}

func (p paths) ref(r hub.Repo, rev string) string {
	return filepath.Join(p.repo(r), "refs", filepath.FromSlash(rev))
}

// partialData is the sparse data file of a partial; partialData+".json" is
// its sidecar.
func (p paths) partialData(r hub.Repo, etag string) string {
	return filepath.Join(p.partial(), r.CacheDir()+"--"+etag)
}

func (p paths) sidecar(r hub.Repo, etag string) string {
	return p.partialData(r, etag) + ".json"
}

// linkTarget is the relative symlink target for snapshots/<commit>/<path>:
// "../../blobs/<etag>" plus one "../" per directory in path, as
// huggingface_hub's _create_symlink writes it.
func linkTarget(path, etag string) string {
	depth := strings.Count(path, "/")
	return strings.Repeat("../", 2+depth) + "blobs/" + etag
}

// parseRepoDir inverts hub.Repo.CacheDir ("models--ns--name"). Repo names
// never contain "--", so the split is unambiguous.
func parseRepoDir(name string) (hub.Repo, bool) {
	plural, rest, ok := strings.Cut(name, "--")
	if !ok {
		return hub.Repo{}, false
	}
	t, ok := hub.ParseRepoType(plural)
	if !ok {
		return hub.Repo{}, false
	}
	r, err := hub.ParseRepo(t, strings.ReplaceAll(rest, "--", "/"))
	return r, err == nil
}

// validFile re-checks a File's identifiers before any of them names a file on
// disk. It is cheap and guards against callers that skipped validation.
func validFile(f File) error {
	if err := validRepo(f.Repo); err != nil {
		return err
	}
	if !hub.IsCommit(f.Commit) {
		return &hub.InvalidError{Field: "commit", Value: f.Commit, Reason: "must be 40 lowercase hex digits"}
	}
	if err := hub.ValidPath(f.Path); err != nil {
		return err
	}
	if f.Size < 0 {
		return fmt.Errorf("%w: negative size %d", ErrUncacheable, f.Size)
	}
	if hub.ETagKind(f.ETag) == hub.HashUnknown {
		return fmt.Errorf("%w: etag %q is neither a sha256 nor a git sha1", ErrUncacheable, f.ETag)
	}
	return nil
}

// writeFileAtomic writes data to a temp file under tmpDir, fsyncs it and
// renames it onto name, then fsyncs name's directory. Readers see either the
// old content or the new, never a torn write.
func writeFileAtomic(tmpDir, name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), dirMode); err != nil {
		return err
	}
	f, err := os.CreateTemp(tmpDir, "w-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, fileMode)
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(name))
}

// syncDir fsyncs a directory so a rename into it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// ensureSymlink makes snapshots/<commit>/<path> a relative symlink to the
// blob, unless it already is one. The link is made in tmp/ (where it dangles
// harmlessly) and renamed into place, so the snapshot path is never missing
// or half-made for a concurrent reader.
func (p paths) ensureSymlink(r hub.Repo, commit, path, etag string) error {
	name := p.snapshot(r, commit, path)
	want := linkTarget(path, etag)
	if got, err := os.Readlink(name); err == nil && got == want {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(name), dirMode); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(p.tmp(), "l-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(want, link); err != nil {
		return err
	}
	return os.Rename(link, name)
}

// removeDanglingLinks walks the repo's snapshots/ once and deletes every
// symlink to blobs/<etag>, for any etag in etags, whose target does not
// exist. A link whose blob exists (again) is kept: the blob may have been
// fetched and promoted anew since it was removed. The check and the unlink
// are not atomic, so a promotion landing in between loses its link; that is
// benign, as Open recreates the snapshot symlink of every complete blob it
// serves.
func (p paths) removeDanglingLinks(r hub.Repo, etags map[string]bool) error {
	root := filepath.Join(p.repo(r), "snapshots")
	var errs []error
	err := filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			errs = append(errs, err)
			return nil
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := os.Readlink(name)
		if err != nil {
			return nil
		}
		if !etags[filepath.Base(target)] || filepath.Base(filepath.Dir(target)) != "blobs" {
			return nil
		}
		if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
			return nil // resolves (or cannot tell): not ours to remove
		}
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}
