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
// legacy repo. A '*' never crosses a '/'.
func NewAdmission(allow, deny, tokens []string) (*Admission, error) {
	for _, p := range append(append([]string{}, allow...), deny...) {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("repo pattern %q: %w", p, err)
		}
	}
	a := &Admission{allow: allow, deny: deny}
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

// repoRefusedError is a repo outside the allow list, or on the deny list:
// 403 RepoNotAllowed.
type repoRefusedError struct{ repo hub.Repo }

func (e *repoRefusedError) Error() string {
	return fmt.Sprintf("this hubproxy does not serve %s (allow-repos / deny-repos)", e.repo)
}

// caller checks the request's token, if tokens are required.
func (a *Admission) caller(r *http.Request) error {
	if a == nil || a.tokens == nil {
		return nil
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !a.tokens[sha256.Sum256([]byte(strings.TrimSpace(tok)))] {
		return errNotAdmitted
	}
	return nil
}

// repo checks repo against the patterns.
func (a *Admission) repo(repo hub.Repo) error {
	if a == nil {
		return nil
	}
	name := repo.String()
	for _, p := range a.deny {
		if ok, _ := path.Match(p, name); ok {
			return &repoRefusedError{repo}
		}
	}
	if len(a.allow) == 0 {
		return nil
	}
	for _, p := range a.allow {
		if ok, _ := path.Match(p, name); ok {
			return nil
		}
	}
	return &repoRefusedError{repo}
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

// passRepo finds the repo a pass-through API path names, if any:
// /api/{models,datasets,spaces}/{ns}/{name}/… . Best effort: paths that name
// none (searches, whoami) are not about one repo.
func passRepo(escaped string) (hub.Repo, bool) {
	rest, ok := strings.CutPrefix(escaped, "/api/")
	if !ok {
		return hub.Repo{}, false
	}
	segs := strings.SplitN(rest, "/", 4)
	if len(segs) < 3 {
		return hub.Repo{}, false
	}
	typ, ok := hub.ParseRepoType(segs[0])
	if !ok {
		return hub.Repo{}, false
	}
	if repo, err := hub.ParseEscapedRepo(typ, segs[1]+"/"+segs[2]); err == nil {
		return repo, true
	}
	return hub.Repo{}, false
}
