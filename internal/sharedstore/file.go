package sharedstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// fileBackend is a directory, typically on a ReadWriteMany volume (NFS,
// CephFS, EFS) mounted at the same path on every node. Objects are files
// under it; temporary files live in .tmp/ beside them, on the same file
// system, so they can be linked and renamed into place.
type fileBackend struct {
	root  string
	modes fileModes
	log   *slog.Logger
	link  func(oldname, newname string) error // os.Link; a test's lossy NFS in tests
}

// fileTmp is the directory of files being written, skipped by list.
const fileTmp = ".tmp"

// staleTmp is how old a temp file must be before check deletes it: a writer
// that died left it, and no live write takes this long.
const staleTmp = time.Hour

func newFile(loc Location, log *slog.Logger) (*fileBackend, error) {
	return &fileBackend{root: filepath.FromSlash(loc.Dir), modes: modesFor(loc),
		log: cmp.Or(log, slog.New(slog.DiscardHandler)), link: os.Link}, nil
}

func (b *fileBackend) path(key string) string {
	return filepath.Join(b.root, filepath.FromSlash(key))
}

func (b *fileBackend) readRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(b.path(key))
	if err != nil {
		return nil, 0, mapFileErr(err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	size := info.Size()
	if n < 0 {
		n = size - off
	}
	if off < 0 || n < 0 || off+n > size {
		f.Close()
		return nil, size, fmt.Errorf("range %d+%d of a %d-byte object: %w", off, n, size, ErrShort)
	}
	return &fileBody{Reader: io.NewSectionReader(f, off, n), f: f, ctx: ctx}, size, nil
}

// fileBody is a section of an open file whose reads fail once ctx ends, as
// an HTTP body's do.
type fileBody struct {
	io.Reader
	f   *os.File
	ctx context.Context
}

func (r *fileBody) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.Reader.Read(p)
}

func (r *fileBody) Close() error { return r.f.Close() }

// create writes data to a temp file and links it to the key's name. link(2)
// fails with EEXIST when the name is taken, atomically, on local file systems
// and on NFS alike: the exclusive create that O_EXCL gives, except that the
// object appears whole, never as an empty file being written. On NFS v3 a
// retransmitted LINK whose first reply was lost answers EEXIST although the
// link is ours, so an EEXIST is checked: the name naming our temp file is
// a success (the classic NFS lock-file rule).
func (b *fileBackend) create(ctx context.Context, key string, data []byte) error {
	tmp, err := b.writeTemp(ctx, data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	err = b.intoDir(key, func(dst string) error { return b.link(tmp, dst) })
	if errors.Is(err, fs.ErrExist) {
		if ours, _ := os.Lstat(tmp); ours != nil {
			if theirs, _ := os.Lstat(b.path(key)); theirs != nil && os.SameFile(ours, theirs) {
				return nil
			}
		}
		return ErrExists
	}
	return err
}

// intoDir runs place (a link or rename to dst) after creating dst's
// directory, again if a delete removed that directory, empty, in between.
func (b *fileBackend) intoDir(key string, place func(dst string) error) error {
	dst := b.path(key)
	for try := 0; ; try++ {
		if err := b.mkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		err := place(dst)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || try == 3 {
			return err
		}
	}
}

// put renames a temp file over the key's name: readers see the old object
// or the new one, never a mix.
func (b *fileBackend) put(ctx context.Context, key string, data []byte) error {
	tmp, err := b.writeTemp(ctx, data)
	if err != nil {
		return err
	}
	err = b.intoDir(key, func(dst string) error { return os.Rename(tmp, dst) })
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// writeTemp writes data to a new file under .tmp/ and syncs it, so what is
// linked into place is durable.
func (b *fileBackend) writeTemp(ctx context.Context, data []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	dir := filepath.Join(b.root, fileTmp)
	if err := b.mkdirAll(dir); err != nil {
		return "", err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	f, err := os.OpenFile(filepath.Join(dir, hex.EncodeToString(rnd[:])), os.O_WRONLY|os.O_CREATE|os.O_EXCL, b.modes.file)
	if err != nil {
		return "", err
	}
	err = f.Chmod(b.modes.file) // what the umask took off
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func (b *fileBackend) stat(ctx context.Context, key string) (Object, error) {
	if err := ctx.Err(); err != nil {
		return Object{}, err
	}
	info, err := os.Stat(b.path(key))
	if err != nil {
		return Object{}, mapFileErr(err)
	}
	if !info.Mode().IsRegular() {
		return Object{}, ErrNotFound
	}
	return Object{Key: key, Size: info.Size(), ModTime: info.ModTime()}, nil
}

// list walks the directory the prefix names (or its parent, for a prefix
// that ends inside a name) and reports the regular files under the prefix.
func (b *fileBackend) list(ctx context.Context, prefix string, fn func(Object) error) error {
	start := b.root
	if prefix != "" {
		dir := prefix
		if !strings.HasSuffix(prefix, "/") {
			dir = path.Dir(prefix)
		}
		if dir != "." {
			start = b.path(dir)
		}
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking, or an empty prefix
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, rerr := filepath.Rel(b.root, p)
		if rerr != nil {
			return rerr
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if key == fileTmp {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		return fn(Object{Key: key, Size: info.Size(), ModTime: info.ModTime()})
	})
	return err
}

// del removes the file and then its directory if that is now empty, so
// deleted files' directories do not pile up.
func (b *fileBackend) del(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p := b.path(key)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if dir := filepath.Dir(p); dir != b.root {
		_ = os.Remove(dir) // fails, harmlessly, unless empty
	}
	return nil
}

// check proves the directory exists and takes files, and clears temp files
// that writers which died left behind.
func (b *fileBackend) check(ctx context.Context) error {
	info, err := os.Stat(b.root)
	if err != nil {
		return &ConfigError{Err: fmt.Errorf("directory: %w (is the shared volume mounted?)", err)}
	}
	if !info.IsDir() {
		return &ConfigError{Err: fmt.Errorf("%s is not a directory", b.root)}
	}
	if err := b.checkModes(info); err != nil {
		return err
	}
	tmp, err := b.writeTemp(ctx, nil)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return &ConfigError{Err: fmt.Errorf("directory is not writable: %w", err)}
		}
		return err
	}
	os.Remove(tmp)
	if ents, err := os.ReadDir(filepath.Join(b.root, fileTmp)); err == nil {
		for _, e := range ents {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleTmp {
				os.Remove(filepath.Join(b.root, fileTmp, e.Name()))
			}
		}
	}
	return nil
}

func mapFileErr(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound
	}
	return err
}
