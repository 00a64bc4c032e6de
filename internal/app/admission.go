package app

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/hubproxy/hubproxy/internal/server"
)

// newAdmission builds the server's admission rules from the configuration,
// reading client-tokens-file once at start.
func newAdmission(cfg Config) (*server.Admission, error) {
	var tokens []string
	if cfg.ClientTokensFile != "" {
		var err error
		if tokens, err = readTokens(cfg.ClientTokensFile); err != nil {
			return nil, fmt.Errorf("client-tokens-file: %w", err)
		}
	}
	a, err := server.NewAdmission(cfg.AllowRepos, cfg.DenyRepos, tokens)
	if err != nil {
		return nil, fmt.Errorf("allow-repos / deny-repos / client-tokens-file: %w", err)
	}
	return a, nil
}

// redirectCheck holds every redirect the upstream answers on its own origin
// to the admission rules (nil when there are none): a renamed repo's old
// name redirects to its new one, which the patterns may refuse. Paths are
// made relative to the upstream's root first, as a proxy chain's upstream
// may sit under a prefix.
func redirectCheck(upstream string, a *server.Admission) func(*url.URL) error {
	if a == nil {
		return nil
	}
	base := ""
	if u, err := url.Parse(upstream); err == nil {
		base = strings.TrimSuffix(u.EscapedPath(), "/")
	}
	return func(target *url.URL) error {
		p, ok := strings.CutPrefix(target.EscapedPath(), base)
		if !ok {
			return a.Redirect(http.MethodGet, target.EscapedPath())
		}
		return a.Redirect(http.MethodGet, p)
	}
}

// readTokens reads one token per line; blank lines and lines starting with
// '#' are skipped. It returns a non-nil slice, empty if the file lists none.
func readTokens(name string) ([]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tokens := []string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			return nil, fmt.Errorf("%s: a line holds more than one word; write one token per line", name)
		}
		tokens = append(tokens, line)
	}
	return tokens, sc.Err()
}
