package repofs

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	caller hub.Caller
	at     hub.FileRef // the file, at its resolved commit (never a branch)
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

// fillOrigin is what the cache fills o's file from: o itself, or o shared
// through the cluster's store. Reads that bypass the cache (stream.go,
// ranges.go) keep using o directly: they are the fallback when the cache,
// and so sharing, cannot help.
func (fs *FS) fillOrigin(o *origin) cache.Origin {
	if fs.opts.Share == nil {
		return o
	}
	return fs.opts.Share(o.etag, o.size, o)
}

func (o *origin) FetchRange(ctx context.Context, off, n int64) (body io.ReadCloser, err error) {
	defer func() {
		if errors.Is(err, fetch.ErrRefused) {
			o.refused.Store(true)
		}
	}()
	url, err := o.downloadURL(ctx, false)
	if err != nil {
		return nil, err
	}
	want := fetch.Want{Size: o.size, ETag: o.etag}
	body, err = o.fs.up.GetRange(ctx, url, o.caller.Auth(), want, off, n)
	if err == nil || !errors.Is(err, fetch.ErrExpired) {
		return body, err
	}
	// Any refusal of a link resolved earlier gets one fresh resolve, with
	// the caller's credentials (which also tells whether access itself was
	// lost), before the error stands.
	o.fs.log.Debug("download URL refused; resolving again", "repo", o.at.Repo.String(), "path", o.at.Path, "err", err)
	if url, err = o.downloadURL(ctx, true); err != nil {
		return nil, err
	}
	return o.fs.up.GetRange(ctx, url, o.caller.Auth(), want, off, n)
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
		o.fs.res.Invalidate(o.caller, o.at)
	}
	m, err := o.fs.res.File(ctx, o.caller, o.at)
	if err != nil {
		return "", err
	}
	if m.DownloadURL == "" {
		return "", fmt.Errorf("resolving %s/%s: %w", o.at.Repo, o.at.Path, fetch.ErrUnavailable)
	}
	if m.ETag != o.etag {
		return "", fmt.Errorf("resolving %s@%s/%s: etag changed from %s to %s", o.at.Repo, o.at.Rev, o.at.Path, o.etag, m.ETag)
	}
	o.mu.Lock()
	o.url = m.DownloadURL
	o.mu.Unlock()
	return m.DownloadURL, nil
}
