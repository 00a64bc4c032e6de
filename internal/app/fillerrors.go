package app

import (
	"context"
	"errors"
	"io"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
)

// fillErrorReason names why a cache fill failed, for the reason label of
// hubproxy_cache_fill_errors_total (metrics.FillErrorReasons). It lives in
// the composition root because it reads both the cache's and the upstream
// client's error types, and neither package knows the other.
func fillErrorReason(err error) string {
	var (
		storage *cache.StorageError
		status  *fetch.StatusError
		rng     *fetch.RangeError
		proto   *fetch.ProtocolError
	)
	switch {
	case errors.As(err, &storage):
		return "storage"
	case errors.As(err, &status):
		return "status"
	case errors.As(err, &rng), errors.As(err, &proto):
		return "protocol"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, fetch.ErrLongBody):
		return "short_body"
	case errors.Is(err, fetch.ErrUnavailable), errors.Is(err, fetch.ErrStalled), errors.Is(err, context.DeadlineExceeded):
		return "network"
	}
	return "other"
}
