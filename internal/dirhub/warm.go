package dirhub

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// ErrClosed is returned by a closed Hub's Warm.
var ErrClosed = errors.New("dirhub: closed")

// Warm hashes every file of every plain-folder repo under the root at its
// current state, so that first requests need not wait for a multi-GB hash
// (hubproxy's upstream client gives a HEAD 10 s). HF cache repos need no
// hashing. Run it in the background at startup; it stops when ctx ends or
// the Hub closes, and returns the first error (a repo that cannot be listed
// is skipped).
func (h *Hub) Warm(ctx context.Context) error {
	if h.hashes.ctx.Err() != nil {
		return ErrClosed
	}
	var errs []error
	for _, repo := range h.plainRepos() {
		s, herr := h.open(repo, "main")
		if herr != nil {
			continue
		}
		if _, err := h.metas(ctx, s.files); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil || h.hashes.ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// plainRepos finds the plain-folder repos under the root, by the layout
// rules of open: <ns>/<name> and one-segment <name> for models, and the same
// under datasets/ and spaces/.
func (h *Hub) plainRepos() []hub.Repo {
	var repos []hub.Repo
	add := func(t hub.RepoType, id string) {
		if r, err := hub.ParseRepo(t, id); err == nil {
			if rel, ok := plainDir(r); ok && isDir(h, rel) {
				repos = append(repos, r)
			}
		}
	}
	scanKind := func(t hub.RepoType, base string) {
		for _, ns := range h.subdirs(base) {
			if t == hub.Model && (ns == "datasets" || ns == "spaces" || strings.Contains(ns, "--")) {
				continue
			}
			rel := filepath.Join(base, ns)
			if hasTopFile(h, rel) {
				add(t, ns)
				continue
			}
			for _, name := range h.subdirs(rel) {
				add(t, ns+"/"+name)
			}
		}
	}
	scanKind(hub.Model, ".")
	scanKind(hub.Dataset, "datasets")
	scanKind(hub.Space, "spaces")
	return repos
}

// subdirs lists the folders directly under rel (not through symlinks).
func (h *Hub) subdirs(rel string) []string {
	d, err := h.root.Open(rel)
	if err != nil {
		return nil
	}
	defer d.Close()
	ents, _ := d.ReadDir(-1)
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}
