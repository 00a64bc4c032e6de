package soak

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"time"
)

// info is the part of a repo info answer the oracle checks.
type info struct {
	ID       string `json:"id"`
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
		Size      int64  `json:"size"`
	} `json:"siblings"`
}

// checkInfo judges an allowed answer to /api/{type}s/{repo}[/revision/{rev}]:
// the commit it names is one of the window's, and it lists that commit's
// files. Xet fields must have been stripped.
func (o *oracle) checkInfo(r *result) judgement {
	if r.status != http.StatusOK {
		return violation("status", "%d %s for repo info", r.status, r.header.Get("X-Error-Code"))
	}
	if bodyCut(r) {
		return unavailable("body cut short")
	}
	if bytes.Contains(r.body, []byte("xetHash")) || bytes.Contains(r.body, []byte("xet-")) {
		return violation("status", "repo info carries Xet fields")
	}
	var in info
	if err := json.Unmarshal(r.body, &in); err != nil {
		return violation("wrong-bytes", "repo info: %v", err)
	}
	if in.ID != r.op.repo.ID() {
		return violation("wrong-bytes", "repo info for %q, asked about %s", in.ID, r.op.repo)
	}
	c, j := o.namedCommit(r, in.SHA)
	if j.out == outViolation {
		return j
	}
	var got []string
	for _, s := range in.Siblings {
		if b := c.files[s.RFilename]; b == nil || b.size() != s.Size {
			return violation("wrong-bytes", "repo info lists %s (%d bytes), which %s does not hold so", s.RFilename, s.Size, c.id)
		}
		got = append(got, s.RFilename)
	}
	slices.Sort(got)
	if !slices.Equal(got, c.paths) {
		return violation("wrong-bytes", "repo info lists %v, commit %s holds %v", got, c.id, c.paths)
	}
	return j
}

// treeEntry is one entry of a tree answer.
type treeEntry struct {
	Type string `json:"type"`
	OID  string `json:"oid"`
	Size int64  `json:"size"`
	Path string `json:"path"`
	LFS  *struct {
		OID string `json:"oid"`
	} `json:"lfs"`
}

// checkTree judges an allowed answer to a recursive tree listing. The
// answer names no commit, so it must be exactly the files of a commit the
// branch named in the window (or earlier, counted as stale).
func (o *oracle) checkTree(r *result) judgement {
	if r.status == http.StatusNotFound && r.header.Get("X-Error-Code") == "EntryNotFound" {
		return violation("status", "EntryNotFound for a repo's root tree")
	}
	if r.status != http.StatusOK {
		return violation("status", "%d %s for a tree", r.status, r.header.Get("X-Error-Code"))
	}
	if bodyCut(r) {
		return unavailable("body cut short")
	}
	if bytes.Contains(r.body, []byte("xetHash")) {
		return violation("status", "tree carries xetHash")
	}
	var entries []treeEntry
	if err := json.Unmarshal(r.body, &entries); err != nil {
		return violation("wrong-bytes", "tree: %v", err)
	}
	matches := func(id string) bool {
		c := o.w.commit(id)
		if c == nil {
			return false
		}
		n := 0
		for _, e := range entries {
			if e.Type != "file" {
				continue
			}
			n++
			b := c.files[e.Path]
			if b == nil || b.size() != e.Size {
				return false
			}
			if b.lfs && (e.LFS == nil || e.LFS.OID != b.etag) || !b.lfs && e.OID != b.etag {
				return false
			}
		}
		return n == len(c.paths)
	}
	fresh, stale := o.commitsFor(r)
	for _, id := range fresh {
		if matches(id) {
			return served()
		}
	}
	for _, id := range o.hist.heads(r.op.repo, time.Time{}, r.headers) {
		if stale(id) && matches(id) {
			return judgement{out: outServed, stale: true}
		}
	}
	return violation("wrong-bytes", "tree of %d entries matches no commit of the window %v", len(entries), fresh)
}
