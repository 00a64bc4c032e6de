package soak

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// info is the part of a repo info answer the oracle checks.
type info struct {
	ID       string          `json:"id"`
	SHA      string          `json:"sha"`
	Private  json.RawMessage `json:"private"`
	Gated    json.RawMessage `json:"gated"`
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
	if len(r.op.expand) > 0 {
		return o.checkProjection(r)
	}
	if j := o.checkAccessFields(r, in.Private, in.Gated); j.out == outViolation {
		return j
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

// checkProjection judges repo info with expand=: "_id", "id" and exactly
// the fields asked for (the Hub's projection), each with a value the repo
// had.
func (o *oracle) checkProjection(r *result) judgement {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &fields); err != nil {
		return violation("wrong-bytes", "repo info: %v", err)
	}
	for k := range fields {
		if k != "_id" && k != "id" && !slices.Contains(r.op.expand, k) {
			return violation("wrong-bytes", "repo info with expand=%v carries %q, which was not asked for", r.op.expand, k)
		}
	}
	for _, k := range r.op.expand {
		if _, ok := fields[k]; !ok {
			return violation("wrong-bytes", "repo info with expand=%v lacks %q", r.op.expand, k)
		}
	}
	return o.checkAccessFields(r, fields["private"], fields["gated"])
}

// checkAccessFields judges repo info's private and gated fields (when
// present): each must be what the repo was at some moment up to the
// answer (an answer replayed from the cache while upstream is down may be
// older than the window).
func (o *oracle) checkAccessFields(r *result, private, gated json.RawMessage) judgement {
	var okPriv, okGated bool
	for _, st := range o.hist.during(time.Time{}, r.headers) {
		p, g := st.private[r.op.repo], st.gated[r.op.repo]
		okPriv = okPriv || private == nil || string(private) == fmt.Sprint(p)
		okGated = okGated || gated == nil || !g && string(gated) == "false" ||
			g && (string(gated) == `"manual"` || string(gated) == `"auto"`)
	}
	switch {
	case !okPriv:
		return violation("wrong-bytes", "repo info says private: %s, which %s never was", private, r.op.repo)
	case !okGated:
		return violation("wrong-bytes", "repo info says gated: %s, which %s never was", gated, r.op.repo)
	}
	return served()
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
	return o.checkEntries(r, "tree", func(c *commitFix) []string { return c.paths })
}

// checkEntries judges a 200 listing of tree entries (a tree, paths-info):
// the entries want names of a commit of the window, or of an older head,
// counted as stale.
func (o *oracle) checkEntries(r *result, what string, want func(*commitFix) []string) judgement {
	if bodyCut(r) {
		return unavailable("body cut short")
	}
	if bytes.Contains(r.body, []byte("xetHash")) {
		return violation("status", "%s carries xetHash", what)
	}
	var entries []treeEntry
	if err := json.Unmarshal(r.body, &entries); err != nil {
		return violation("wrong-bytes", "%s: %v", what, err)
	}
	matches := func(id string) bool {
		c := o.w.commit(id)
		return c != nil && entriesMatch(entries, c, want(c))
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
	return violation("wrong-bytes", "%s of %d entries matches no commit of the window %v", what, len(entries), fresh)
}

// entriesMatch reports whether the file entries are exactly those of want
// at commit c (those of them c has), each with c's size and oid.
func entriesMatch(entries []treeEntry, c *commitFix, want []string) bool {
	n := 0
	for _, e := range entries {
		if e.Type != "file" {
			continue
		}
		n++
		b := c.files[e.Path]
		if b == nil || b.size() != e.Size || !slices.Contains(want, e.Path) {
			return false
		}
		if b.lfs && (e.LFS == nil || e.LFS.OID != b.etag) || !b.lfs && e.OID != b.etag {
			return false
		}
	}
	has := 0
	for _, p := range want {
		if c.files[p] != nil {
			has++
		}
	}
	return n == has
}

// checkPathsInfo judges an allowed answer to paths-info: the entries of the
// asked paths a commit of the window has (unknown ones left out), or of an
// older head, counted as stale.
func (o *oracle) checkPathsInfo(r *result) judgement {
	if r.status != http.StatusOK {
		return violation("status", "%d %s for paths-info", r.status, r.header.Get("X-Error-Code"))
	}
	return o.checkEntries(r, "paths-info "+fmt.Sprint(r.op.paths), func(*commitFix) []string { return r.op.paths })
}
