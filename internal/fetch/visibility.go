package fetch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Visibility is what the hub says of a repo itself, whoever asks: whether it
// is private, and whether its files are gated behind accepted conditions.
type Visibility struct {
	Private bool
	Gated   bool // "auto" and "manual" gating both refuse anonymous downloads
}

// Public reports whether anyone, without credentials, may read the repo.
func (v Visibility) Public() bool { return !v.Private && !v.Gated }

// maxInfoBody bounds the repo-info answer read for its visibility fields.
const maxInfoBody = 16 << 20

// Visibility asks the hub anonymously for repo's info and returns its
// private and gated fields. The call carries no credentials at all (not even
// the proxy token): its answer must describe the repo, not any caller.
// A refusal comes back as a *StatusError (401/404 RepoNotFound, GatedRepo).
func (c *Client) Visibility(ctx context.Context, repo hub.Repo) (Visibility, error) {
	if repo.IsZero() {
		return Visibility{}, &hub.InvalidError{Field: "repo id", Reason: "no repository named"}
	}
	u, err := url.Parse(c.baseStr + "/api/" + repo.Type().Plural() + "/" + repo.ID())
	if err != nil {
		return Visibility{}, fmt.Errorf("fetch: building the repo-info URL for %s: %w", repo, err)
	}
	resp, err := c.API(ctx, http.MethodGet, u.EscapedPath(), "", http.Header{}, nil)
	if err != nil {
		return Visibility{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Visibility{}, newStatusError(resp, u, false, nil)
	}
	var info struct {
		Private *bool `json:"private"`
		Gated   any   `json:"gated"` // false, or "auto" / "manual"
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxInfoBody))
	if err != nil {
		return Visibility{}, err
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return Visibility{}, &ProtocolError{URL: redact(u), Reason: "repo info is not JSON"}
	}
	// Both fields or nothing: an answer without one (a projection, or an
	// upstream that leaves fields out) says nothing of the repo's
	// visibility, and reading an absent "gated" as "not gated" would make
	// a gated repo public (docs/hub-protocol.md §9).
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(data, &fields) // it parsed as an object above
	if _, ok := fields["gated"]; !ok || info.Private == nil {
		return Visibility{}, &ProtocolError{URL: redact(u), Reason: "repo info lacks the private or gated field"}
	}
	gated := false
	switch g := info.Gated.(type) {
	case bool:
		gated = g
	case string:
		gated = g != "" && g != "false"
	default:
		gated = true // null or an unknown form: assume the stricter meaning
	}
	return Visibility{Private: *info.Private, Gated: gated}, nil
}
