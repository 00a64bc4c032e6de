package resolver

import (
	"context"
	"errors"
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
		sent := r.now()
		v, err := r.up.Visibility(ctx, repo)
		var se *fetch.StatusError
		switch {
		case err == nil:
			r.policy.visible(repo, v.Public(), sent)
		case errors.As(err, &se) && errors.Is(se, fetch.ErrRefused):
			r.policy.visible(repo, false, r.now())
		}
		return nil, err
	})
}

// AnsweredMetadata records what upstream answered a caller's metadata
// request about repo (repo info, tree, paths-info): nil is a grant of the
// repo's metadata only (the Hub serves a gated repo's metadata to anyone,
// so it says nothing of the files); a refusal erases the caller's grants.
// Other errors, EntryNotFound and RevisionNotFound prove nothing here.
func (r *Resolver) AnsweredMetadata(c hub.Caller, repo hub.Repo, err error) {
	var se *fetch.StatusError
	switch {
	case err == nil && !c.Anonymous():
		// Not for anonymous callers: they all share one identity, and one
		// grant would outlive the repo turning private for every one of
		// them. Their cached metadata replays by the answer's own time
		// (MayReplayMetadata's anonAt), which a later "not public" ends.
		r.policy.grantedMeta(c, repo)
	case errors.As(err, &se) && errors.Is(se, fetch.ErrRefused):
		r.refused(c, repo, se)
	}
}

// NotPublic records that an answer of upstream's about repo itself said it
// is private or gated. That direction is safe to learn from any answer,
// a client's projected one included: it only ever makes the policy
// stricter. Only hubproxy's own probe can say a repo is public.
func (r *Resolver) NotPublic(repo hub.Repo) { r.policy.visible(repo, false, r.now()) }

// answeredFile records what upstream answered a caller's resolve of a file:
// its metadata is a grant of the repo's files to a credential (anonymous
// answers are recorded per file instead, by learn); a refusal erases the
// caller's grants.
func (r *Resolver) answeredFile(c hub.Caller, repo hub.Repo, err error) {
	var se *fetch.StatusError
	switch {
	case err == nil:
		r.opts.Observe("allowed")
		if !c.Anonymous() {
			r.policy.grantedFile(c, repo)
		}
	case errors.As(err, &se) && errors.Is(se, fetch.ErrRefused):
		r.refused(c, repo, se)
	}
}

func (r *Resolver) refused(c hub.Caller, repo hub.Repo, se *fetch.StatusError) {
	r.opts.Observe("denied")
	r.log.Info("access denied upstream", "repo", repo.String(), "caller", c, "status", se.Code, "code", se.ErrorCode)
	r.policy.refused(c, repo, se)
}

// MayReplayMetadata decides whether caller c may have a cached metadata
// answer about repo while upstream cannot be asked. anonAt is when upstream
// gave that answer to an anonymous caller (zero if it did not). It returns
// nil or ErrUnverifiable.
func (r *Resolver) MayReplayMetadata(c hub.Caller, repo hub.Repo, anonAt time.Time) error {
	if _, err := r.policy.fallbackMeta(c, repo, anonAt); err != nil {
		r.opts.Observe("unverifiable")
		return err
	}
	return nil
}

// Reusable reports whether an answer about a revision rev that upstream
// gave a caller at stored may be reused without asking again: every answer
// is an access decision (a repo can turn gated or private, a token be
// revoked), so none is reused past AccessTTL; one about a branch or tag not past RevisionTTL
// either, since the branch may have moved. This is the one rule the file
// resolutions and the JSON API share.
func (r *Resolver) Reusable(rev string, stored time.Time) bool {
	age := r.now().Sub(stored)
	return age < r.opts.AccessTTL && (hub.IsCommit(rev) || age < r.opts.RevisionTTL)
}
