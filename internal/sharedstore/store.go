// Package sharedstore is the object store a cluster of hubproxy nodes shares:
// an S3 bucket (or an S3-compatible server: MinIO, Ceph RGW, ...) or a
// directory on a ReadWriteMany volume. It offers the few operations the
// shared tier builds on, the same way for every backend: ranged reads,
// conditional create (the one primitive that lets nodes agree without a
// coordinator: If-None-Match: * on S3, link(2) on a file system), plain
// put, stat, list and delete.
//
// What is stored is decided by the callers (internal/sharedfill); this
// package knows keys and bytes only, and counts every call for metrics.
package sharedstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Sentinel errors; match them with errors.Is. Every other error from a Store
// means the store itself failed (unreachable, refusing, timing out).
var (
	// ErrNotFound: no object has that key.
	ErrNotFound = errors.New("sharedstore: no such object")
	// ErrExists: a conditional create found the key taken.
	ErrExists = errors.New("sharedstore: object exists")
	// ErrShort: the object ends before the range asked of it.
	ErrShort = errors.New("sharedstore: object shorter than the range")
)

// ConfigError is a store that cannot work as configured: a malformed URL,
// a bucket or directory that does not exist, credentials that are refused.
// Starting with it is pointless, unlike with a store that is merely down.
type ConfigError struct {
	URL string // redacted
	Err error
}

func (e *ConfigError) Error() string { return fmt.Sprintf("shared store %s: %v", e.URL, e.Err) }
func (e *ConfigError) Unwrap() error { return e.Err }

// Object describes one stored object.
type Object struct {
	Key     string // relative to the store's prefix
	Size    int64
	ModTime time.Time
}

// Op names a store operation, for metrics.
type Op string

// The operations.
const (
	OpGet    Op = "get"
	OpCreate Op = "create"
	OpPut    Op = "put"
	OpStat   Op = "stat"
	OpList   Op = "list"
	OpDelete Op = "delete"
)

// backend is one kind of store. Keys are relative, '/'-separated and clean
// (checkKey); the Store checks them before a backend sees them.
type backend interface {
	readRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, int64, error)
	create(ctx context.Context, key string, data []byte) error
	put(ctx context.Context, key string, data []byte) error
	stat(ctx context.Context, key string) (Object, error)
	list(ctx context.Context, prefix string, fn func(Object) error) error
	del(ctx context.Context, key string) error
	// check proves at start that the store is usable: a *ConfigError when
	// it never will be, another error when it is only unreachable.
	check(ctx context.Context) error
}

// Options configure Open.
type Options struct {
	// Observe, when set, is told of every operation once it ends: its
	// bytes (read or written) and its error (nil, ErrNotFound and
	// ErrExists are answers, not failures).
	Observe func(op Op, bytes int64, err error)
	// ReadOnly skips the write probe: for tools that only list the store
	// (cache store ls, du) with credentials that may not write.
	ReadOnly bool
	// Logger receives the AWS SDK's own log lines (at warn and debug),
	// the detail behind a credentials error, and a file:// store's
	// warnings about its directory's modes; nil discards them.
	Logger *slog.Logger
}

// Store is an opened shared store. It is safe for concurrent use.
type Store struct {
	b       backend
	url     string // redacted, for messages
	observe func(op Op, bytes int64, err error)
}

// Open parses rawURL (see ParseURL), builds the backend and checks that it
// answers. A *ConfigError means it cannot work; any other error means it did
// not answer now, and the returned Store is usable (its calls fail until the
// store comes back), so the caller may carry on without it.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	loc, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var b backend
	switch loc.Scheme {
	case "s3":
		b, err = newS3(ctx, loc, opts.Logger)
	case "file":
		b, err = newFile(loc, opts.Logger)
	}
	if err != nil {
		return nil, &ConfigError{URL: loc.String(), Err: err}
	}
	s := &Store{b: b, url: loc.String(), observe: opts.Observe}
	if s.observe == nil {
		s.observe = func(Op, int64, error) {}
	}
	if err := b.check(ctx); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.URL = s.url
			return nil, ce
		}
		return s, fmt.Errorf("shared store %s: %w", s.url, err)
	}
	if opts.ReadOnly {
		return s, nil
	}
	if err := s.probe(ctx); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			return nil, ce
		}
		return s, err
	}
	return s, nil
}

// probe creates one object twice and deletes it: the first create proves the
// store takes writes, the second that it refuses to overwrite. A server that
// ignored If-None-Match would let two nodes both win a chunk's claim, every
// time; better to refuse it at start than to find out from the hub's bill.
func (s *Store) probe(ctx context.Context) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	key := "v1/probe/" + hex.EncodeToString(rnd[:])
	err := s.Create(ctx, key, []byte("probe"))
	if err != nil {
		if denied(err) {
			return &ConfigError{URL: s.url, Err: fmt.Errorf("writing refused: check the credentials' permissions: %w", err)}
		}
		return err
	}
	defer s.Delete(context.WithoutCancel(ctx), key)
	switch err := s.Create(ctx, key, []byte("probe")); {
	case err == nil:
		return &ConfigError{URL: s.url, Err: errors.New("a second create of the same key succeeded: the server does not honour conditional create (If-None-Match: *), which hubproxy needs to fetch each chunk once")}
	case !errors.Is(err, ErrExists):
		return err
	}
	return nil
}

// denied reports an error that says the credentials may not do this.
func denied(err error) bool {
	switch status(err) {
	case http.StatusForbidden, http.StatusUnauthorized:
		return true
	}
	return errors.Is(err, fs.ErrPermission)
}

// String is the store's URL without credentials.
func (s *Store) String() string { return s.url }

// ReadRange reads n bytes of key from off (n < 0: to the end). It returns the
// body and the object's whole size, so callers can tell a truncated object.
// A range past the end is ErrShort, never a short body.
func (s *Store) ReadRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, int64, error) {
	if err := checkKey(key); err != nil {
		return nil, 0, err
	}
	body, size, err := s.b.readRange(ctx, key, off, n)
	if err != nil {
		s.observe(OpGet, 0, err)
		return nil, 0, wrap(OpGet, key, err)
	}
	return &countingBody{ReadCloser: body, done: func(read int64, err error) { s.observe(OpGet, read, err) }}, size, nil
}

// Create stores data under key only if no object has it: ErrExists if one
// does. The object appears whole or not at all.
func (s *Store) Create(ctx context.Context, key string, data []byte) error {
	return s.write(ctx, OpCreate, key, data, s.b.create)
}

// Put stores data under key, replacing what is there.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	return s.write(ctx, OpPut, key, data, s.b.put)
}

func (s *Store) write(ctx context.Context, op Op, key string, data []byte, fn func(context.Context, string, []byte) error) error {
	if err := checkKey(key); err != nil {
		return err
	}
	err := fn(ctx, key, data)
	n := int64(len(data))
	if err != nil {
		n = 0
	}
	s.observe(op, n, err)
	return wrap(op, key, err)
}

// Stat describes key, or returns ErrNotFound.
func (s *Store) Stat(ctx context.Context, key string) (Object, error) {
	if err := checkKey(key); err != nil {
		return Object{}, err
	}
	o, err := s.b.stat(ctx, key)
	s.observe(OpStat, 0, err)
	return o, wrap(OpStat, key, err)
}

// List calls fn for every object whose key starts with prefix, in no
// particular order, until fn returns an error (which List returns).
func (s *Store) List(ctx context.Context, prefix string, fn func(Object) error) error {
	if prefix != "" {
		if err := checkKey(prefix); err != nil {
			return err
		}
	}
	var fnErr error
	err := s.b.list(ctx, prefix, func(o Object) error {
		fnErr = fn(o)
		return fnErr
	})
	if err != nil && errors.Is(err, fnErr) {
		return err // the caller's, not the store's
	}
	s.observe(OpList, 0, err)
	return wrap(OpList, prefix, err)
}

// Delete removes key; deleting what is not there is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	err := s.b.del(ctx, key)
	s.observe(OpDelete, 0, err)
	return wrap(OpDelete, key, err)
}

// Error is a failed store operation (never ErrNotFound, ErrExists or
// ErrShort, which are answers and returned bare).
type Error struct {
	Op  Op
	Key string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("shared store %s %s: %v", e.Op, e.Key, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

func wrap(op Op, key string, err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrExists) || errors.Is(err, ErrShort) {
		return err
	}
	return &Error{Op: op, Key: key, Err: err}
}

// checkKey refuses keys that could escape the prefix or a directory: empty
// segments, "." and "..", backslashes. A trailing '/' is allowed, for
// prefixes.
func checkKey(key string) error {
	parts := strings.Split(strings.TrimSuffix(key, "/"), "/")
	for _, part := range parts {
		if part == "" || part == "." || part == ".." || strings.ContainsAny(part, "\\\x00") {
			return fmt.Errorf("sharedstore: bad key %q", key)
		}
	}
	return nil
}

// countingBody reports the bytes read from a body, and how it ended, once.
type countingBody struct {
	io.ReadCloser
	n    int64
	err  error
	once atomic.Bool
	done func(read int64, err error)
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && !errors.Is(err, context.Canceled) {
		c.err = err // a reader that gave up is not the store failing
	}
	return n, err
}

func (c *countingBody) Close() error {
	err := c.ReadCloser.Close()
	if c.once.CompareAndSwap(false, true) {
		c.done(c.n, c.err)
	}
	return err
}
