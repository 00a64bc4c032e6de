package server

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Admission decides who may use the proxy at all, before any upstream
// request or disk write: optionally only callers presenting one of a static
// list of tokens, and optionally only some repos (include/exclude patterns,
// as a repository manager's remote repos take). Upstream still decides
// every caller's access to each repo; admission only narrows it, so a proxy
// reachable by a whole cluster cannot be made to fill its disk with
// anything anyone asks for. The zero value admits everything.
type Admission struct {
	allow, deny []string          // repo patterns; deny wins
	tokens      map[[32]byte]bool // sha256 of accepted tokens; nil = no token needed
}

// NewAdmission checks the patterns and keeps the tokens hashed. Patterns
// use path.Match syntax on the repo as a user writes it: "Qwen/*" for a
// namespace's models, "datasets/org/*" for an org's datasets, "gpt2" for a
// legacy repo. A '*' never crosses a '/'. Matching ignores case, because
// the Hub does: "Harness/Tiny-GPT2" is the repo "harness/tiny-gpt2"
// (docs/hub-protocol.md, "Repo ids").
func NewAdmission(allow, deny, tokens []string) (*Admission, error) {
	for _, p := range append(append([]string{}, allow...), deny...) {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("repo pattern %q: %w", p, err)
		}
	}
	a := &Admission{allow: foldAll(allow), deny: foldAll(deny)}
	if tokens != nil {
		if len(tokens) == 0 {
			return nil, errors.New("the client token list is empty: nobody could use the proxy")
		}
		a.tokens = make(map[[32]byte]bool, len(tokens))
		for _, t := range tokens {
			a.tokens[sha256.Sum256([]byte(t))] = true
		}
	}
	return a, nil
}

// errNotAdmitted is a caller without an accepted token: 401.
var errNotAdmitted = errors.New("this hubproxy accepts only callers with a listed token (Authorization: Bearer <token>)")

// repoRefusedError is a repo outside the allow list, or on the deny list,
// or (repo zero) an /api/ path naming no repo admission could check while
// patterns are set: 403 RepoNotAllowed.
type repoRefusedError struct {
	repo hub.Repo
	path string // the escaped path, when repo is zero
}

func (e *repoRefusedError) Error() string {
	if e.repo.IsZero() {
		p := e.path
		if len(p) > 96 {
			p = p[:96] + "…"
		}
		return fmt.Sprintf("this hubproxy serves only the repos allow-repos / deny-repos admit, and %q names no repo it can check "+
			"(without a repo, only GET or HEAD of /api/whoami-v2, /api/models, /api/datasets and /api/spaces pass)", p)
	}
	return fmt.Sprintf("this hubproxy does not serve %s (allow-repos / deny-repos)", e.repo)
}

// caller checks the request's token, if tokens are required.
func (a *Admission) caller(r *http.Request) error { return a.auth(r.Header.Get("Authorization")) }

// Caller checks a caller that another front door (the S3 API) named from
// credentials of its own, as the hub routes check their Authorization
// header: nil, or the 401 error of a caller without an accepted token. A
// nil Admission admits every caller.
func (a *Admission) Caller(c hub.Caller) error { return a.auth(c.Auth()) }

// auth checks an Authorization value against the accepted tokens.
func (a *Admission) auth(authorization string) error {
	if a == nil || a.tokens == nil {
		return nil
	}
	scheme, tok, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !a.tokens[sha256.Sum256([]byte(strings.TrimSpace(tok)))] {
		return errNotAdmitted
	}
	return nil
}

// foldAll lower-cases patterns, so matching folds case on both sides.
func foldAll(patterns []string) []string {
	out := make([]string, len(patterns))
	for i, p := range patterns {
		out[i] = strings.ToLower(p)
	}
	return out
}

// narrows reports whether any repo pattern is set.
func (a *Admission) narrows() bool { return a != nil && len(a.allow)+len(a.deny) > 0 }

// Repo checks repo against the patterns, for a route of another listener
// (the admin API's staging) held to them as the public routes are: nil, or
// the 403 RepoNotAllowed error. A nil Admission admits every repo.
func (a *Admission) Repo(repo hub.Repo) error { return a.repo(repo) }

// repo checks repo against the patterns, ignoring case as the Hub does.
func (a *Admission) repo(repo hub.Repo) error {
	if a == nil {
		return nil
	}
	if a.denied(repo) {
		return &repoRefusedError{repo: repo}
	}
	if len(a.allow) == 0 {
		return nil
	}
	name := strings.ToLower(repo.String())
	for _, p := range a.allow {
		if ok, _ := path.Match(p, name); ok {
			return nil
		}
	}
	return &repoRefusedError{repo: repo}
}

// denied reports whether a deny pattern matches repo, ignoring case.
func (a *Admission) denied(repo hub.Repo) bool {
	name := strings.ToLower(repo.String())
	for _, p := range a.deny {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// admitCaller is middleware refusing callers without an accepted token on
// every route of the hub API (probes and metrics are not behind it).
func (s *Server) admitCaller(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.opts.Admission.caller(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		next(w, r)
	}
}

// admitAPI is repo admission for an /api/ request whose escaped path
// hub.ParseAPIURL parsed as ar (which has already refused, with a 400, the
// paths a server could normalise differently from us: dot segments, encoded
// slashes in ids, backslashes). With no repo patterns set everything passes:
// upstream decides. With patterns, a path is admitted only if the repo it
// names is, or if it is one of the few routes about no repo that clients
// need (repoLess); any other path whose repo cannot be told is refused,
// since it is relayed as it came and upstream may read a repo in it.
func (s *Server) admitAPI(r *http.Request, ar hub.APIURL) error {
	return s.opts.Admission.api(r.Method, r.URL.EscapedPath(), ar)
}

// Redirect holds a redirect the upstream answered, to the escaped path
// target on its own origin (relative to the upstream's root), to the rules
// the request was held to: a renamed repo's old name redirects to the new
// one, which may be a repo these patterns refuse. A target that is neither a
// file URL nor an /api/ path whose repo can be told is refused while
// patterns are set. Without patterns everything passes.
func (a *Admission) Redirect(method, target string) error {
	if !a.narrows() {
		return nil
	}
	if strings.HasPrefix(target, "/api/") {
		ar, err := hub.ParseAPIURL(target)
		if err != nil {
			return err
		}
		return a.api(method, target, ar)
	}
	fr, err := hub.ParseFileURL(target)
	if err != nil {
		return &repoRefusedError{path: target}
	}
	return a.repo(fr.Repo)
}

func (a *Admission) api(method, esc string, ar hub.APIURL) error {
	if !a.narrows() {
		return nil
	}
	repo, guessed := ar.Repo, ar.Kind == hub.APIInfo && ar.Rev == ""
	if ar.Kind == hub.APIOther {
		var ok bool
		if repo, ok = hub.PassThroughRepo(esc); !ok {
			if repoLess(method, esc) {
				return nil
			}
			return &repoRefusedError{path: esc}
		}
		guessed = true
	}
	if err := a.repo(repo); err != nil {
		return err
	}
	// Where no marker ends the id, "/api/models/gpt2/refs" may as well be
	// the legacy repo "gpt2" (and its refs) as "gpt2/refs": a deny pattern
	// for the one-segment reading refuses it too.
	if ns, _, two := strings.Cut(repo.ID(), "/"); guessed && two {
		if legacy, err := hub.ParseRepo(repo.Type(), ns); err == nil && a.denied(legacy) {
			return &repoRefusedError{repo: legacy}
		}
	}
	return nil
}

// repoLess reports whether an /api/ request is one of the routes that name
// no repo and that clients need, let through whatever the patterns: who the
// token belongs to (huggingface_hub's whoami and login) and the repo
// listings and searches (list_models and friends; any query). Read-only
// methods only. A listing shows what upstream lists, denied repos included:
// admission narrows what is served and cached, not what can be named.
func repoLess(method, escaped string) bool {
	if method != http.MethodGet && method != http.MethodHead {
		return false
	}
	switch escaped {
	case "/api/whoami-v2", "/api/models", "/api/datasets", "/api/spaces":
		return true
	}
	return false
}
