package sharedstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// A file:// store holds chunks of gated files and every node's claims, so
// who may read and write its directory is the store's trust boundary:
// whoever can write it is a store writer (README, "What a store writer can
// and cannot do"), trusted like every holder of the bucket's credentials.
//
// By default (mode=private) that is the one user every node runs as:
// objects 0600, directories 0700. With mode=group it is every user of the
// directory's group, for nodes that run as different uids: directories
// 2770, so that new files and directories take the directory's group
// whoever makes them, and objects 0660. Either way nothing is open to other
// users, whatever the umask: the modes are set with chmod after each create.
type fileModes struct {
	file, dir fs.FileMode
	group     bool
}

var (
	privateModes = fileModes{file: 0o600, dir: 0o700}
	groupModes   = fileModes{file: 0o660, dir: 0o770 | fs.ModeSetgid, group: true}
)

func modesFor(loc Location) fileModes {
	if loc.Group {
		return groupModes
	}
	return privateModes
}

// mkdirAll is os.MkdirAll that gives each directory it makes the store's
// mode, umask or not. A directory another node made in between is taken as
// it is (its maker set its mode; this node may not own it).
func (b *fileBackend) mkdirAll(dir string) error {
	info, err := os.Stat(dir)
	if err == nil {
		if !info.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: errors.New("not a directory")}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := b.mkdirAll(parent); err != nil {
			return err
		}
	}
	switch err := os.Mkdir(dir, b.modes.dir.Perm()); {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return err
	}
	return os.Chmod(dir, b.modes.dir)
}

// checkModes says what is wrong with who may enter the store. A directory
// or object of the store's own (.tmp and v1 … v4 in the root, and their
// entries: v4/<shard>, v4/clock, ...) that other users may read, enter or
// write is refused:
// every chunk of a gated file under it would be readable by any user of the
// host, and the node cannot know whether it may tighten a directory another
// node's user made, so the operator closes it (the error says how). The
// root itself is only warned about: it is often a volume's mount point the
// node does not own, and with its entries closed other users can see their
// names and no more (with o+w they can also rename them: a store writer's
// denial of service, never wrong bytes). In group mode a root without the
// set-group-ID bit is warned about too: files then take each node's own
// primary group, and nodes of other uids cannot write them.
func (b *fileBackend) checkModes(root fs.FileInfo) error {
	if root.Mode().Perm()&0o007 != 0 {
		b.log.Warn("shared store: other users of this host may enter the store's directory; its own directories are closed to them (chmod o-rwx the directory to hide their names too)",
			"dir", b.root, "mode", fmt.Sprintf("%#o", root.Mode().Perm()))
	}
	if b.modes.group && root.Mode()&fs.ModeSetgid == 0 {
		b.log.Warn("shared store: mode=group, but the store's directory is not set-group-ID: new files take each node's primary group, so nodes of other uids may not write them (chgrp GROUP the directory, chmod 2770 it)",
			"dir", b.root, "mode", fmt.Sprintf("%#o", root.Mode().Perm()))
	}
	return b.checkOpen(b.root, 2, ownEntry)
}

// ownEntry says whether a name in the root is the store's: .tmp or a
// layout's directory (v1 … v4). Anything else there (a file system's
// lost+found, an operator's notes) is not the store's to judge, and may not
// be readable by the node's user at all.
func ownEntry(name string) bool {
	if name == fileTmp {
		return true
	}
	if len(name) < 2 || name[0] != 'v' {
		return false
	}
	for _, c := range name[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// checkOpen refuses an entry of dir that own takes (nil: every one), and
// the entries under it down to depth levels, open to other users.
func (b *fileBackend) checkOpen(dir string, depth int, own func(string) bool) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, fs.ErrPermission):
		return &ConfigError{Err: fmt.Errorf("%s is not readable by this node's user: %w (nodes of several uids share a store with mode=group, in a directory of their group)", dir, err)}
	case err != nil:
		return err
	}
	for _, e := range ents {
		if own != nil && !own(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		info, err := os.Lstat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted meanwhile
			}
			return err
		}
		if !info.IsDir() && !info.Mode().IsRegular() {
			continue
		}
		if info.Mode().Perm()&0o007 != 0 {
			return &ConfigError{Err: fmt.Errorf("%s is open to other users of this host (mode %#o): they could read stored chunks of gated files; close the store with chmod -R o-rwx %s", p, info.Mode().Perm(), b.root)}
		}
		if info.IsDir() && depth > 1 {
			if err := b.checkOpen(p, depth-1, nil); err != nil {
				return err
			}
		}
	}
	return nil
}
