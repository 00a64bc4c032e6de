package resolver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// Origin returns the cache.Origin for a resolved file: ranged GETs on its
// download URL. When a signed URL has expired (or the answer came from the
// cache and has no URL yet) it re-resolves at the file's commit, never at a
// branch, so a branch that moved meanwhile cannot swap the bytes of a fill.
func (r *Resolver) Origin(auth string, repo hub.Repo, path string, m Meta) cache.Origin {
	return &origin{r: r, auth: auth, repo: repo, path: path, commit: m.Commit, etag: m.ETag, size: m.Size, url: m.DownloadURL}
}

type origin struct {
	r      *Resolver
	auth   string
	repo   hub.Repo
	path   string
	commit string
	etag   string
	size   int64

	mu  sync.Mutex
	url string // current download URL; guarded by mu
}

var _ cache.Origin = (*origin)(nil)

func (o *origin) FetchRange(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	url, err := o.downloadURL(ctx, false)
	if err != nil {
		return nil, err
	}
	want := fetch.Want{Size: o.size, ETag: o.etag}
	body, err := o.r.up.GetRange(ctx, url, o.auth, want, off, n)
	if err == nil || !errors.Is(err, fetch.ErrExpired) {
		return body, err
	}
	// Any refusal of a link resolved earlier (an expired signature, on a
	// CDN or on the hub's own host) gets one fresh resolve, with the
	// caller's credentials, before the error stands.
	o.r.log.Debug("download URL refused; resolving again", "repo", o.repo.String(), "path", o.path, "err", err)
	if url, err = o.downloadURL(ctx, true); err != nil {
		return nil, err
	}
	return o.r.up.GetRange(ctx, url, o.auth, want, off, n)
}

// downloadURL returns the URL to fetch from, resolving again when there is
// none or when refresh is set.
func (o *origin) downloadURL(ctx context.Context, refresh bool) (string, error) {
	o.mu.Lock()
	url := o.url
	o.mu.Unlock()
	if url != "" && !refresh {
		return url, nil
	}
	if refresh {
		o.r.Invalidate(o.auth, o.repo, o.commit, o.path)
	}
	m, err := o.r.File(ctx, o.auth, o.repo, o.commit, o.path)
	if err != nil {
		return "", err
	}
	if m.DownloadURL == "" {
		return "", fmt.Errorf("resolving %s/%s: %w", o.repo, o.path, fetch.ErrUnavailable)
	}
	if m.ETag != o.etag {
		return "", fmt.Errorf("resolving %s@%s/%s: etag changed from %s to %s", o.repo, o.commit, o.path, o.etag, m.ETag)
	}
	o.mu.Lock()
	o.url = m.DownloadURL
	o.mu.Unlock()
	return m.DownloadURL, nil
}
