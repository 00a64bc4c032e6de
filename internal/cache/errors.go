package cache

import (
	"errors"
	"fmt"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotCached means the cache holds nothing for the request (a ref,
	// a meta document, or a file for offline use).
	ErrNotCached = errors.New("cache: not cached")
	// ErrUncacheable means the file cannot be stored under its etag (not a
	// sha256 or git sha1, or inconsistent with what is stored); the caller
	// should serve it straight from upstream.
	ErrUncacheable = errors.New("cache: file cannot be cached")
	// ErrClosed is returned by a closed Store or Handle.
	ErrClosed = errors.New("cache: closed")
)

// VerifyError reports that a fully downloaded file does not hash to its etag.
// The partial has been deleted; the next Open refetches it.
type VerifyError struct {
	ETag string // what the file should hash to
	Got  string // what it hashed to
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("cache: content hashes to %s, want etag %s", e.Got, e.ETag)
}

// FillError reports that fetching a block from upstream failed repeatedly.
// Err is the last upstream error.
type FillError struct {
	Off      int64 // file offset of the block that could not be fetched
	Attempts int
	Err      error
}

func (e *FillError) Error() string {
	return fmt.Sprintf("cache: fetching bytes at %d failed %d times: %v", e.Off, e.Attempts, e.Err)
}

func (e *FillError) Unwrap() error { return e.Err }

// StorageError is a failure to write fetched bytes to the cache's disk (a full
// disk, a quota, an I/O error). The bytes were fine; the cache could not keep
// them, so a reader gets it at once rather than after retries, and may serve
// the bytes straight from upstream instead.
type StorageError struct{ Err error }

func (e *StorageError) Error() string { return "cache: writing to disk: " + e.Err.Error() }
func (e *StorageError) Unwrap() error { return e.Err }
