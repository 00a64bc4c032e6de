package resolver

import (
	"context"
	"errors"
	"net/http"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// probeVisibility asks upstream anonymously whether repo is public, at most
// once at a time per repo, and records the answer. The result channel is
// closed-over by callers that want to wait for it.
func (r *Resolver) probeVisibility(ctx context.Context, repo hub.Repo) <-chan singleflight.Result {
	return r.probes.DoChan(repo.String(), func() (any, error) {
		v, err := r.up.Visibility(ctx, repo)
		var se *fetch.StatusError
		switch {
		case err == nil:
			r.policy.visible(repo, v.Public())
		case errors.As(err, &se) && refusal(se):
			r.policy.visible(repo, false)
		}
		return nil, err
	})
}

// Answered records what upstream answered a caller about repo: nil is an
// answer (access granted), a *fetch.StatusError a refusal or a missing
// entry (the hub checks access before revisions and paths, so EntryNotFound
// and RevisionNotFound mean the caller may read the repo). Other errors
// prove nothing and are ignored. File resolutions record it themselves; the
// JSON API calls it.
func (r *Resolver) Answered(auth string, repo hub.Repo, err error) {
	caller := callerHash(auth)
	var se *fetch.StatusError
	switch {
	case err == nil, errors.As(err, &se) && se.Code == http.StatusNotFound &&
		(se.ErrorCode == "EntryNotFound" || se.ErrorCode == "RevisionNotFound"):
		r.opts.Observe("allowed")
		r.policy.granted(caller, repo)
	case se != nil && refusal(se):
		r.opts.Observe("denied")
		r.log.Info("access denied upstream", "repo", repo.String(), "caller", callerID(auth), "status", se.Code, "code", se.ErrorCode)
		r.policy.refused(caller, auth == "", repo, se)
	}
}

// Visible records what upstream says of the repo itself (a repo-info
// answer's private and gated fields), whoever asked.
func (r *Resolver) Visible(repo hub.Repo, v fetch.Visibility) { r.policy.visible(repo, v.Public()) }

// MayServeCached decides whether caller may have a cached answer about repo
// while upstream cannot be asked. anonAt is when upstream gave that answer
// to an anonymous caller (zero if it did not). It returns nil or
// ErrUnverifiable.
func (r *Resolver) MayServeCached(auth string, repo hub.Repo, anonAt time.Time) error {
	if _, err := r.policy.fallback(callerHash(auth), repo, anonAt); err != nil {
		r.opts.Observe("unverifiable")
		return err
	}
	return nil
}

// Fresh reports whether caller may reuse a cached answer about repo without
// asking upstream at all: its own access decision, or the repo's public
// visibility, is no older than AccessTTL.
func (r *Resolver) Fresh(auth string, repo hub.Repo) bool {
	return r.policy.live(callerHash(auth), repo)
}

// Reusable reports whether caller may reuse an answer about repo@rev that
// upstream gave at stored, without asking again: every answer is an access
// decision (a repo can turn gated or private, a token be revoked), so none
// is reused past AccessTTL; one about a branch or tag not past RevisionTTL
// either, since the branch may have moved. This is the one rule the file
// resolutions and the JSON API share.
func (r *Resolver) Reusable(auth string, repo hub.Repo, rev string, stored time.Time) bool {
	age := r.now().Sub(stored)
	return age < r.opts.AccessTTL && (hub.IsCommit(rev) || age < r.opts.RevisionTTL)
}
