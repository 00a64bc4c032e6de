package cache

import (
	"io/fs"
	"os"
	"path/filepath"
)

// The cache holds gated and private files: its files and directories are
// for hubproxy's user and group only, never other users of the host. The
// group may read, because the Helm chart's sidecar mode can mount the cache
// read-only into the inference container, which may run as another user:
// the pod's fsGroup (65532 by default) owns the volume, new files take that
// group (the kubelet sets the volume's set-group-ID bit), and every
// container of the pod is in it. Nothing needs group write.
const (
	fileMode fs.FileMode = 0o640
	dirMode  fs.FileMode = 0o750
)

// tightenModes takes other users' access off the directories under root
// that older versions made 0755 (each repo's, and .hubproxy/), so the 0644
// files inside them stop being readable by other users too, without a walk
// of the whole cache. Root itself is left as it is: it may be a volume's
// mount point, or a directory the user made and shares. Failures (a
// directory owned by someone else) are not errors: it was readable before.
func tightenModes(root string) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if _, ok := parseRepoDir(e.Name()); !ok && e.Name() != ".hubproxy" {
			continue
		}
		p := filepath.Join(root, e.Name())
		info, err := os.Lstat(p)
		if err != nil || info.Mode().Perm()&0o007 == 0 {
			continue
		}
		// Keep the set-group-ID bit, which gives new files the group.
		_ = os.Chmod(p, info.Mode()&^0o007)
	}
}
