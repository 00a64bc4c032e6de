package ociimage

import (
	"archive/tar"
	"bytes"
	"time"
)

// entry is one directory or regular file of the image's only layer.
type entry struct {
	path     string // absolute, as the container sees it
	mode     int64  // permission bits, sticky bit included
	uid, gid int
	data     []byte // nil for a directory
}

// The account files distroless ships: the nonroot user exists by name too,
// for tools that look it up, and its home is WorkingDir.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	// Go's resolver reads it to order /etc/hosts before DNS.
	nsswitch = "hosts: files dns\n"
)

// rootfs lists the image's files, parents before children: what the
// Dockerfile copies (the binary, the directories nonroot owns) and what its
// distroless base provides (CA certificates, the accounts, a sticky /tmp).
func rootfs(binary, caCerts []byte) []entry {
	dir := func(p string, mode int64, uid int) entry { return entry{path: p, mode: mode, uid: uid, gid: uid} }
	file := func(p string, mode int64, data []byte) entry { return entry{path: p, mode: mode, data: data} }
	return []entry{
		dir("/etc", 0o755, 0),
		file("/etc/group", 0o644, []byte(group)),
		file("/etc/nsswitch.conf", 0o644, []byte(nsswitch)),
		file("/etc/passwd", 0o644, []byte(passwd)),
		dir("/etc/ssl", 0o755, 0),
		dir("/etc/ssl/certs", 0o755, 0),
		file(CACertsPath, 0o644, caCerts),
		dir("/home", 0o755, 0),
		dir(WorkingDir, 0o700, NonrootUID),
		file(BinaryPath, 0o755, binary),
		dir("/run", 0o755, 0),
		dir(OwnedDirs[1], 0o755, NonrootUID),
		dir("/tmp", 0o1777, 0),
		dir("/var", 0o755, 0),
		dir("/var/cache", 0o755, 0),
		dir(OwnedDirs[0], 0o755, NonrootUID),
	}
}

// writeTar serialises entries as an uncompressed layer. Every timestamp is
// mtime, so the same inputs always give the same layer digest.
func writeTar(entries []entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.path[1:], // layers name paths relative to the root
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if e.data == nil {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
