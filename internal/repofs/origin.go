package repofs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// origin is where a file's bytes come from: ranged GETs on its download
// URL, for the caller that opened it. When the URL is refused (an expired
// signature, wherever it points) or the file was resolved from the cache
// alone and has no URL yet, it resolves again at the file's commit, never
// at a branch, so a branch that moved meanwhile cannot swap the bytes of a
// fill. Every answer must describe the resolved file (fetch.Want).
type origin struct {
	fs     *FS
	auth   string
	repo   hub.Repo
	path   string
	commit string
	etag   string
	size   int64

	mu  sync.Mutex
	url string // current download URL; guarded by mu

	// refused is set once upstream refused this caller's fetch (File uses
	// it to tell its own refusal from another caller's; see
	// File.othersRefusal).
	refused atomic.Bool
}

var _ cache.Origin = (*origin)(nil)

// Sharing makes a file's fills shared with other nodes: the origin it
// returns reads what another node already fetched from a shared store, and
// fetches the rest through up once for the cluster. It is given only files
// whose access upstream has decided for this caller (Open resolved them
// first), and keys what it shares by etag, a content hash, so sharing never
// widens who may read what.
type Sharing interface {
	Wrap(etag string, size int64, up cache.Origin) cache.Origin
}

// fillOrigin is what the cache fills o's file from: o itself, or o shared
// through the cluster's store. Reads that bypass the cache (stream.go,
// ranges.go) keep using o directly: they are the fallback when the cache,
// and so sharing, cannot help.
func (fs *FS) fillOrigin(o *origin) cache.Origin {
	if fs.opts.Sharing == nil {
		return o
	}
	return fs.opts.Sharing.Wrap(o.etag, o.size, o)
}

func (o *origin) FetchRange(ctx context.Context, off, n int64) (body io.ReadCloser, err error) {
	defer func() {
		if isRefusal(err) {
			o.refused.Store(true)
		}
	}()
	url, err := o.downloadURL(ctx, false)
	if err != nil {
		return nil, err
	}
	want := fetch.Want{Size: o.size, ETag: o.etag}
	body, err = o.fs.up.GetRange(ctx, url, o.auth, want, off, n)
	if err == nil || !errors.Is(err, fetch.ErrExpired) {
		return body, err
	}
	// Any refusal of a link resolved earlier gets one fresh resolve, with
	// the caller's credentials (which also tells whether access itself was
	// lost), before the error stands.
	o.fs.log.Debug("download URL refused; resolving again", "repo", o.repo.String(), "path", o.path, "err", err)
	if url, err = o.downloadURL(ctx, true); err != nil {
		return nil, err
	}
	return o.fs.up.GetRange(ctx, url, o.auth, want, off, n)
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
		o.fs.res.Invalidate(o.auth, o.repo, o.commit, o.path)
	}
	m, err := o.fs.res.File(ctx, o.auth, o.repo, o.commit, o.path)
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

// isRefusal reports whether err is upstream refusing the caller the repo:
// an answer about the credential, not about the bytes.
func isRefusal(err error) bool {
	var se *fetch.StatusError
	if err == nil || !errors.As(err, &se) {
		return false
	}
	return se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden ||
		se.Code == http.StatusNotFound && (se.ErrorCode == "RepoNotFound" || se.ErrorCode == "GatedRepo")
}
