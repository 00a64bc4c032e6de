package hubtest

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// RepoSpec describes a repository to create with AddRepo.
type RepoSpec struct {
	Type   hub.RepoType // "" means hub.Model
	ID     string       // "name" or "ns/name"; must pass hub.ParseRepo
	Branch string       // the default branch; "" means "main"
	Files  []File
	// Private repos are invisible (RepoNotFound) to every caller whose token
	// is not in ApprovedTokens.
	Private bool
	// Gated repos answer GatedRepo (401 anonymous, 403 unapproved token) to
	// callers whose token is not in ApprovedTokens.
	Gated          bool
	ApprovedTokens []string
}

// repoState is one repository. Its fields are guarded by Hub.mu; the commits
// it points to are immutable.
type repoState struct {
	repo          hub.Repo
	defaultBranch string
	refs          map[string]string // branch, tag or "refs/pr/N" → commit id
	commits       map[string]*commitObj
	private       bool
	gated         bool
	approved      map[string]bool
}

// repoKey is what Hub.repos is keyed by: a repo's type and its id folded
// to lower case. The Hub's routing matches repo ids case-insensitively
// (docs/hub-protocol.md §9 rule 6: `Harness/Tiny-GPT2` reaches
// `harness/tiny-gpt2`), so every casing of an id names the one repo, whose
// canonical id (repoState.repo, as it was added) is what answers carry and
// whose access rules apply whatever case was asked.
type repoKey struct {
	typ hub.RepoType
	id  string
}

// keyOf folds repo to its key. Repo ids are ASCII, so ToLower is exact.
func keyOf(repo hub.Repo) repoKey {
	return repoKey{typ: repo.Type(), id: strings.ToLower(repo.ID())}
}

// repoLocked is the one place a repo is looked up, in any case; nil if the
// hub has none by that id. Callers hold Hub.mu.
func (h *Hub) repoLocked(repo hub.Repo) *repoState {
	return h.repos[keyOf(repo)]
}

// commitDate dates the n-th commit the hub makes: a minute after the one
// before, from a fixed epoch, so dates are deterministic.
func commitDate(n int) time.Time {
	return time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(n) * time.Minute)
}

// AddRepo creates (or replaces) a repository with one commit holding
// spec.Files on spec.Branch, and returns that commit's id. spec.ID, in the
// case given, is the repo's canonical id; ids are matched case-insensitively,
// so adding "Acme/X" replaces "acme/x". It panics on an invalid id or path,
// as a fixture error is a bug in the calling test.
func (h *Hub) AddRepo(spec RepoSpec) (commit string) {
	if spec.Type == "" {
		spec.Type = hub.Model
	}
	repo, err := hub.ParseRepo(spec.Type, spec.ID)
	if err != nil {
		panic(fmt.Sprintf("hubtest.AddRepo: %v", err))
	}
	branch := spec.Branch
	if branch == "" {
		branch = "main"
	}
	if err := hub.ValidRevision(branch); err != nil {
		panic(fmt.Sprintf("hubtest.AddRepo: %v", err))
	}
	blobs := makeBlobs("hubtest.AddRepo", spec.Files)
	rs := &repoState{
		repo:          repo,
		defaultBranch: branch,
		refs:          map[string]string{},
		commits:       map[string]*commitObj{},
		private:       spec.Private,
		gated:         spec.Gated,
		approved:      map[string]bool{},
	}
	for _, t := range spec.ApprovedTokens {
		rs.approved[t] = true
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	h.repos[keyOf(repo)] = rs
	return h.commitLocked(rs, branch, "", blobs)
}

// Commit makes a new commit on branch ("" = the default branch) whose file
// set is exactly files, and moves the branch to it. The parent is the
// branch's head, or the default branch's head for a new branch. Older commits
// stay readable by id. It panics if the repo does not exist.
func (h *Hub) Commit(repo hub.Repo, branch string, files []File) string {
	blobs := makeBlobs("hubtest.Commit", files)
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := h.mustRepoLocked("hubtest.Commit", repo)
	if branch == "" {
		branch = rs.defaultBranch
	}
	if err := hub.ValidRevision(branch); err != nil {
		panic(fmt.Sprintf("hubtest.Commit: %v", err))
	}
	parent, ok := rs.refs[branch]
	if !ok {
		parent = rs.refs[rs.defaultBranch]
	}
	return h.commitLocked(rs, branch, parent, blobs)
}

// SetRef points name (a tag, a branch or "refs/pr/N") at an existing commit.
// It panics if the repo or commit does not exist.
func (h *Hub) SetRef(repo hub.Repo, name, commit string) {
	if err := hub.ValidRevision(name); err != nil {
		panic(fmt.Sprintf("hubtest.SetRef: %v", err))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := h.mustRepoLocked("hubtest.SetRef", repo)
	if rs.commits[commit] == nil {
		panic(fmt.Sprintf("hubtest.SetRef: %s has no commit %q", repo, commit))
	}
	rs.refs[name] = commit
}

// ApproveToken grants tok access to a gated or private repo, as accepting a
// gated repo's conditions does.
func (h *Hub) ApproveToken(repo hub.Repo, tok string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mustRepoLocked("hubtest.ApproveToken", repo).approved[tok] = true
}

// SetAccess makes repo gated and/or private, or public again, from now on,
// as its owner can at any time. Approved tokens stay approved.
func (h *Hub) SetAccess(repo hub.Repo, gated, private bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := h.mustRepoLocked("hubtest.SetAccess", repo)
	rs.gated, rs.private = gated, private
}

// GrantToken undoes RevokeToken: tok's approvals count again.
func (h *Hub) GrantToken(tok string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.revoked, tok)
}

// RevokeToken makes tok lose every approval it had. The token still
// authenticates (so gated repos answer 403, unknown ones 404), but it no
// longer opens anything.
func (h *Hub) RevokeToken(tok string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.revoked[tok] = true
}

// FileInfo is what the hub knows about one file at one commit, for tests
// to compare proxy answers against.
type FileInfo struct {
	Commit  string
	Size    int64
	LFS     bool
	OID     string // git blob sha1 (of the pointer for LFS files)
	SHA256  string // LFS files only
	ETag    string // what clients name the blob by: SHA256 for LFS files, else OID
	XetHash string // LFS files only
}

// Stat describes path at rev (a branch, tag, "refs/pr/N", "HEAD" or commit).
func (h *Hub) Stat(repo hub.Repo, rev, path string) (FileInfo, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	rs := h.repoLocked(repo)
	if rs == nil {
		return FileInfo{}, false
	}
	c := rs.commitFor(rev)
	if c == nil {
		return FileInfo{}, false
	}
	b := c.files[path]
	if b == nil {
		return FileInfo{}, false
	}
	return FileInfo{Commit: c.id, Size: b.size(), LFS: b.lfs, OID: b.oid, SHA256: b.sha256, ETag: b.etag(), XetHash: b.xetHash}, true
}

// FileURL is the /resolve/ URL a client would use for path at rev, with the
// revision escaped as huggingface_hub does ("refs%2Fpr%2F1").
func (h *Hub) FileURL(repo hub.Repo, rev, path string) string {
	return h.URL + "/" + repo.String() + "/resolve/" + url.PathEscape(rev) + "/" + escapePath(path)
}

// escapePath escapes each segment of a repo path, keeping the slashes.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// commitFor resolves rev within the repo: "HEAD", a branch, tag or PR ref
// (also spelt "refs/heads/x" or "refs/tags/x"), or a full commit id. Callers
// hold Hub.mu.
func (rs *repoState) commitFor(rev string) *commitObj {
	if rev == "HEAD" {
		rev = rs.defaultBranch
	}
	if id, ok := rs.refs[rev]; ok {
		return rs.commits[id]
	}
	for _, p := range []string{"refs/heads/", "refs/tags/"} {
		if name, ok := strings.CutPrefix(rev, p); ok {
			if id, ok := rs.refs[name]; ok {
				return rs.commits[id]
			}
		}
	}
	if hub.IsCommit(rev) {
		return rs.commits[rev]
	}
	return nil
}

func (h *Hub) mustRepoLocked(op string, repo hub.Repo) *repoState {
	rs := h.repoLocked(repo)
	if rs == nil {
		panic(fmt.Sprintf("%s: no repo %s", op, repo))
	}
	return rs
}

// commitLocked records a commit built from blobs on branch and registers its
// blobs for the CDN and the foreign host. Callers hold h.mu for writing.
func (h *Hub) commitLocked(rs *repoState, branch, parent string, blobs map[string]*blob) string {
	c := newCommit(rs.repo, branch, parent, commitDate(h.seq), blobs)
	h.seq++
	rs.commits[c.id] = c
	rs.refs[branch] = c.id
	for _, b := range blobs {
		if b.lfs {
			h.blobs[b.sha256] = b
		}
		h.blobs[b.oid] = b
	}
	return c.id
}

// makeBlobs validates and hashes files. Hashing happens here, before the
// caller takes Hub.mu, because it is the slow part.
func makeBlobs(op string, files []File) map[string]*blob {
	out := make(map[string]*blob, len(files))
	for _, f := range files {
		if err := hub.ValidPath(f.Path); err != nil {
			panic(fmt.Sprintf("%s: %v", op, err))
		}
		if _, dup := out[f.Path]; dup {
			panic(fmt.Sprintf("%s: duplicate path %q", op, f.Path))
		}
		out[f.Path] = newBlob(f)
	}
	for p := range out {
		for d := p; strings.Contains(d, "/"); {
			d = d[:strings.LastIndexByte(d, '/')]
			if _, clash := out[d]; clash {
				panic(fmt.Sprintf("%s: %q is both a file and a directory", op, d))
			}
		}
	}
	return out
}
