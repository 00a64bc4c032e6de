package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrLocked means another process (a running server, or a prune) holds the
// cache directory. Two stores on one directory would each believe they own
// its partial files and temp dir, so the second is refused rather than
// allowed to corrupt the first.
var ErrLocked = errors.New("cache: the directory is in use by another hubproxy process")

// dirLock is an exclusive, advisory lock on <dir>/.hubproxy/lock, held for a
// store's lifetime (or a prune's). The kernel drops it if the process dies,
// so a crash never leaves the cache locked.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	p := filepath.Join(paths{root: dir}.state(), "lock")
	if err := os.MkdirAll(filepath.Dir(p), dirMode); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		return nil, err
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing drops the flock
	l.f = nil
	return err
}
