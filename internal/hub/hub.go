// Package hub holds the small vocabulary every other package shares: repository
// identities, revision and path validation, and ETag normalisation, all following
// the rules huggingface_hub itself applies. It is pure: no I/O, no HTTP.
//
// Everything that reaches the disk or an upstream URL passes through these
// validators first, so a hostile repo id, revision or path is refused here with a
// clear *InvalidError rather than somewhere deep in the cache.
package hub

import (
	"crypto/sha1"
	"crypto/sha256"
	"fmt"
	"hash"
	"regexp"
	"strings"
	"unicode/utf8"
)

// RepoType is the kind of repository: model, dataset or space.
type RepoType string

// The repository kinds the hub serves.
const (
	Model   RepoType = "model"
	Dataset RepoType = "dataset"
	Space   RepoType = "space"
)

// Plural is the API path segment for t ("models", "datasets", "spaces").
func (t RepoType) Plural() string { return string(t) + "s" }

// URLPrefix is what precedes the repo id in a file URL: "" for models,
// "datasets/" and "spaces/" for the others.
func (t RepoType) URLPrefix() string {
	if t == Model {
		return ""
	}
	return string(t) + "s/"
}

// ParseRepoType maps an API plural ("models") to its RepoType.
func ParseRepoType(plural string) (RepoType, bool) {
	switch plural {
	case "models":
		return Model, true
	case "datasets":
		return Dataset, true
	case "spaces":
		return Space, true
	}
	return "", false
}

// Repo identifies one repository on the hub. It is valid by construction:
// the only ways to make one are ParseRepo, which validates, and MustRepo for
// ids known to be valid; its zero value (IsZero) names no repo. So a Repo
// handed down the stack never needs checking again.
type Repo struct {
	typ RepoType
	id  string // "name" or "namespace/name", validated
}

// Type is the repo's kind.
func (r Repo) Type() RepoType { return r.typ }

// ID is "name" or "namespace/name".
func (r Repo) ID() string { return r.id }

// IsZero reports whether r is the zero Repo, which names no repository.
func (r Repo) IsZero() bool { return r.typ == "" }

// MustRepo is ParseRepo for ids known to be valid (constants, tests); it
// panics on an invalid one.
func MustRepo(t RepoType, id string) Repo {
	r, err := ParseRepo(t, id)
	if err != nil {
		panic(err)
	}
	return r
}

// Folded is r as the Hub's routing matches it: ids are ASCII and compared
// without case, so `Org/Model` and `org/model` are one repo there. What is
// known about a repo (who may read it, whether it is public) is kept under
// Folded; the cache layout keeps the id as asked, as huggingface_hub does.
func (r Repo) Folded() Repo { return Repo{typ: r.typ, id: strings.ToLower(r.id)} }

// String is the repo as a user writes it: "datasets/ns/name" or "ns/name".
func (r Repo) String() string { return r.Type().URLPrefix() + r.ID() }

// CacheDir is the folder name huggingface_hub uses for r under HF_HUB_CACHE:
// "models--ns--name".
func (r Repo) CacheDir() string {
	return r.Type().Plural() + "--" + strings.ReplaceAll(r.ID(), "/", "--")
}

// InvalidError reports an identifier that failed validation. Its message is safe
// to show to clients: it names the field and the rule, never internal state.
type InvalidError struct {
	Field  string // "repo id", "revision", "path"
	Value  string
	Reason string
}

func (e *InvalidError) Error() string {
	v := e.Value
	if len(v) > 96 {
		v = v[:96] + "…"
	}
	return fmt.Sprintf("invalid %s %q: %s", e.Field, v, e.Reason)
}

// repoPart follows the hub's naming rule for namespaces and names: letters,
// digits, '-', '_' and '.', at most 96 characters, not starting or ending with
// '-' or '.', and no "--" or ".." anywhere (huggingface_hub validate_repo_id).
var repoPart = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$`)

// ParseRepo validates id ("name" or "ns/name") and returns the Repo.
func ParseRepo(t RepoType, id string) (Repo, error) {
	bad := func(reason string) (Repo, error) {
		return Repo{}, &InvalidError{Field: "repo id", Value: id, Reason: reason}
	}
	switch t {
	case Model, Dataset, Space:
	default:
		return bad("unknown repo type")
	}
	parts := strings.Split(id, "/")
	if len(parts) > 2 {
		return bad("must be 'name' or 'namespace/name'")
	}
	for _, p := range parts {
		if !repoPart.MatchString(p) {
			return bad("names use letters, digits, '-', '_' and '.', up to 96 characters")
		}
		if strings.Contains(p, "--") || strings.Contains(p, "..") {
			return bad("'--' and '..' are not allowed")
		}
	}
	return Repo{typ: t, id: id}, nil
}

// MaxRevisionLen bounds revision names; git refs can be long, but not unbounded.
const MaxRevisionLen = 256

// ValidRevision checks a revision (branch, tag, commit or refs/pr/N) before it is
// used in a file name or an upstream URL.
func ValidRevision(rev string) error {
	bad := func(reason string) error {
		return &InvalidError{Field: "revision", Value: rev, Reason: reason}
	}
	if rev == "" {
		return bad("empty")
	}
	if len(rev) > MaxRevisionLen {
		return bad("too long")
	}
	if !utf8.ValidString(rev) {
		return bad("not UTF-8")
	}
	if strings.HasPrefix(rev, "/") || strings.HasSuffix(rev, "/") || strings.HasPrefix(rev, "-") {
		return bad("must not start or end with '/' or start with '-'")
	}
	for _, c := range rev {
		if c < 0x20 || c == 0x7f || c == '\\' || c == ':' || c == '?' || c == '*' || c == '[' || c == '~' || c == '^' || c == ' ' {
			return bad("contains a character git does not allow in refs")
		}
	}
	for _, seg := range strings.Split(rev, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasPrefix(seg, ".") || strings.HasSuffix(seg, ".lock") {
			return bad("has an empty, dot or .lock path segment")
		}
	}
	return nil
}

// MaxPathLen bounds file paths inside a repo.
const MaxPathLen = 1024

// ValidPath checks a file path inside a repo: relative, '/'-separated, no empty,
// "." or ".." segments, no NUL or control characters, no backslashes.
func ValidPath(p string) error {
	bad := func(reason string) error {
		return &InvalidError{Field: "path", Value: p, Reason: reason}
	}
	if p == "" {
		return bad("empty")
	}
	if len(p) > MaxPathLen {
		return bad("too long")
	}
	if !utf8.ValidString(p) {
		return bad("not UTF-8")
	}
	if strings.HasPrefix(p, "/") {
		return bad("absolute paths are not allowed")
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return bad("contains a control character or backslash")
		}
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".", "..":
			return bad("has an empty, '.' or '..' segment")
		}
		if len(seg) > 255 {
			return bad("a segment is longer than 255 bytes")
		}
	}
	return nil
}

// IsCommit reports whether rev is a full 40-hex commit id, which is immutable.
func IsCommit(rev string) bool { return isLowerHex(rev, 40) }

// isLowerHex reports whether s is exactly n lowercase hex digits. It runs on
// every request (commits, ETags), so it is a loop, not a regexp.
func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < n; i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// NormalizeETag strips a weak prefix and quotes, as huggingface_hub's
// _normalize_etag does; the result names the blob file.
func NormalizeETag(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "W/")
	return strings.Trim(s, `"`)
}

// HashKind says how a blob's content can be verified against its ETag.
type HashKind int

// The verifiable ETag kinds.
const (
	HashUnknown HashKind = iota
	HashSHA256           // LFS oid: sha256 of the content
	HashGitSHA1          // git blob id: sha1("blob <size>\x00" + content)
)

// ETagKind classifies a normalised ETag. Only HashSHA256 and HashGitSHA1 ETags
// are used as file names in the cache; anything else is served uncached.
func ETagKind(etag string) HashKind {
	switch {
	case isLowerHex(etag, 64):
		return HashSHA256
	case isLowerHex(etag, 40):
		return HashGitSHA1
	}
	return HashUnknown
}

// NewHash returns the hash an ETag of kind names, primed for content of size
// bytes: sha256 of the content for LFS oids, and for git blob ids
// sha1("blob <size>\x00" + content). Write the content, then compare the hex
// of Sum with the ETag.
func NewHash(kind HashKind, size int64) hash.Hash {
	if kind == HashGitSHA1 {
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", size)
		return h
	}
	return sha256.New()
}

// SplitRevision splits the "rev/path…" part of a file or tree URL, where the
// revision may be an unencoded "refs/pr/N" or "refs/convert/X" (sent raw by
// HfFileSystem and the JS listFiles), which take three segments. Both parts
// are still escaped.
func SplitRevision(rest string) (rev, path string) {
	if strings.HasPrefix(rest, "refs/pr/") || strings.HasPrefix(rest, "refs/convert/") {
		parts := strings.SplitN(rest, "/", 4)
		if len(parts) == 4 {
			return strings.Join(parts[:3], "/"), parts[3]
		}
		return rest, ""
	}
	rev, path, _ = strings.Cut(rest, "/")
	return rev, path
}
