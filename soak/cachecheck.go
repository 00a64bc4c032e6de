package soak

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// checkCache checks p's cache directory after p stopped: `hubproxy cache
// verify` passes, and, read independently, every blob is the hub's content
// under its own name, every snapshot link names the blob of that file at
// that commit, and every ref names a commit the branch really had.
func (s *soak) checkCache(rep *Report, p *proxy) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.cfg.Bin, "cache", "verify", "--cache-dir", p.dir).CombinedOutput()
	last := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	rep.Verify = append(rep.Verify, p.name+": "+last)
	if err != nil {
		s.fail("corrupt", fmt.Sprintf("hubproxy cache verify on %s's cache: %v\n%s", p.name, err, out))
		rep.CorruptBlobs += strings.Count(string(out), "CORRUPT ")
	}
	for _, fix := range s.w.allRepos() {
		s.checkRepoDir(rep, p, fix.repo)
	}
}

func (s *soak) checkRepoDir(rep *Report, p *proxy, repo hub.Repo) {
	root := filepath.Join(p.dir, repo.CacheDir())
	blobs, err := os.ReadDir(filepath.Join(root, "blobs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // a repo this proxy never held has none
		s.fail("corrupt", fmt.Sprintf("%s: reading %s's blobs: %v", p.name, repo, err))
	}
	for _, e := range blobs {
		rep.Blobs++
		data, err := os.ReadFile(filepath.Join(root, "blobs", e.Name()))
		b := s.w.blob(e.Name())
		switch {
		case err != nil:
			s.fail("corrupt", fmt.Sprintf("%s: blob %s/%s: %v", p.name, repo, e.Name(), err))
		case b == nil:
			s.fail("corrupt", fmt.Sprintf("%s: blob %s/%s names no content the hub has", p.name, repo, e.Name()))
		case !bytes.Equal(data, b.data) || contentName(data, b.lfs) != e.Name():
			rep.CorruptBlobs++
			s.fail("corrupt", fmt.Sprintf("%s: blob %s/%s does not hold the hub's bytes", p.name, repo, e.Name()))
		}
	}
	snaps := filepath.Join(root, "snapshots")
	_ = filepath.WalkDir(snaps, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		rel, _ := filepath.Rel(snaps, path)
		commit, file, _ := strings.Cut(filepath.ToSlash(rel), "/")
		target, _ := os.Readlink(path)
		etag := filepath.Base(target)
		c := s.w.commit(commit)
		if c == nil || c.files[file] == nil || c.files[file].etag != etag {
			s.fail("corrupt", fmt.Sprintf("%s: snapshot %s/%s@%s links blob %s, not the file's", p.name, repo, file, commit, etag))
		}
		return nil
	})
	refs := filepath.Join(root, "refs")
	_ = filepath.WalkDir(refs, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(path)
		rev, _ := filepath.Rel(refs, path)
		if commit := strings.TrimSpace(string(b)); rev == "main" && !s.hist.everHead(repo, commit, time.Now()) {
			s.fail("corrupt", fmt.Sprintf("%s: refs/main of %s names %s, never the branch's commit", p.name, repo, commit))
		}
		return nil
	})
}

// contentName is what a blob holding data is named: its sha256 (LFS) or
// its git blob sha1.
func contentName(data []byte, lfs bool) string {
	if lfs {
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:])
	}
	return hub.GitBlobSHA1(data)
}
