package cache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// NB: lock order. Store.mu is taken before any item.saveMu, which is taken
// before that item's mu; never the other way round. Store.closeMu is only
// ever taken alone (to start a tracked goroutine, or by Close). No lock is
// held across an upstream request, a hash, or a wait; under Store.mu only
// cheap, O(1) file-system calls happen (open, close, stat, rename, statfs,
// and unlinking small files). Never walk a directory or unlink a large file
// under it: removals rename their file into tmp/ and leave the rest to the
// janitor (janitor.go). Methods named fooLocked expect the relevant mu to be
// held.

// Origin fetches bytes of one file from upstream. The body must yield exactly
// n bytes or an error (the caller's implementation validates Content-Range,
// length, and a 200 answered to a ranged request, and errors then), and
// reads from it must fail once ctx ends (as an http.Response body does).
type Origin interface {
	FetchRange(ctx context.Context, off, n int64) (io.ReadCloser, error)
}

// File names one file of a repo at a commit, with the metadata that decides
// where it is stored.
type File struct {
	Repo   hub.Repo
	Commit string // 40-hex commit the file was resolved at
	Path   string // path inside the repo (hub.ValidPath; checked again)
	ETag   string // normalised; a sha256 or git sha1, else Open returns ErrUncacheable
	Size   int64
}

// linkKey is one snapshot entry: (repo, commit, path).
type linkKey struct {
	repo         hub.Repo
	commit, path string
}

// Store is the disk cache. It is safe for concurrent use.
type Store struct {
	// Immutable after Open.
	opts   Options
	paths  paths
	log    *slog.Logger
	sem    chan struct{}   // MaxFills tokens for upstream requests
	ctx    context.Context // lifetime: cancelled by Close, aborting fills
	cancel context.CancelFunc

	used     atomic.Int64 // budgeted bytes: blobs plus present bytes of partials
	reserved atomic.Int64 // bytes fills in flight have yet to write
	hashBufs sync.Pool    // *[]byte of hashStep bytes for running hashes
	// overBudget is set while evictFor cannot fit the budget, so the warning
	// is logged once per episode rather than once per fill.
	overBudget atomic.Bool
	stats      counters
	waiters    atomic.Int64 // readers blocked in ensure
	readers    atomic.Int64 // sequential readers of partial files, sharing MaxFills (pace.go)
	pins       pinState     // what eviction must keep (pins.go)

	lock    *dirLock    // held from Open to Close
	meta    *metaBudget // keeps .hubproxy/meta bounded
	marks   markers     // keeps the .no_exist markers bounded (noexist.go)
	hooks   testHooks   // nil funcs outside tests
	closeMu sync.RWMutex
	closed  bool           // guarded by closeMu
	wg      sync.WaitGroup // fills and promotions; Add only under closeMu with !closed

	mu sync.Mutex
	// Guarded by mu.
	items map[itemKey]*item
	lru   *list.List          // of *item, most recently opened at the front
	idle  *list.List          // of *item: unreferenced blobs whose file stays open, most recent at the front
	links map[linkKey]*item   // snapshot entries of partial items, for Stat
	index map[*item][]linkKey // the links entries of each item, to drop them
	jan   janitor             // disk work left by removals; partly guarded by mu (see its fields)
}

// Open creates the directory tree if needed, reloads partials from their
// sidecars (dropping ranges whose data is short), indexes existing blobs, and
// evicts down to the budget.
func Open(opts Options) (*Store, error) {
	return open(opts, testHooks{})
}

// open is Open with test hooks.
func open(opts Options, hooks testHooks) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p := paths{root: opts.Dir}
	for _, d := range []string{p.root, p.partial(), p.meta(), p.tmp()} {
		if err := os.MkdirAll(d, dirMode); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
	}
	lock, err := lockDir(p.root)
	if err != nil {
		return nil, err
	}
	tightenModes(p.root)
	if err := checkVersion(p); err != nil {
		lock.unlock()
		return nil, err
	}
	// Temp files of a previous process are garbage: nothing refers to them.
	wipeTmp(p)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		lock:   lock,
		meta:   newMetaBudget(p.meta(), opts.MaxMetaBytes),
		hooks:  hooks,
		opts:   opts,
		paths:  p,
		log:    opts.Logger,
		sem:    make(chan struct{}, opts.MaxFills),
		ctx:    ctx,
		cancel: cancel,
		items:  make(map[itemKey]*item),
		lru:    list.New(),
		idle:   list.New(),
		links:  make(map[linkKey]*item),
		index:  make(map[*item][]linkKey),
	}
	if err := s.load(); err != nil {
		cancel()
		lock.unlock()
		return nil, err
	}
	s.evictFor()
	return s, nil
}

// checkVersion refuses a tree written with another layout version, and
// stamps a fresh one.
func checkVersion(p paths) error {
	b, err := os.ReadFile(p.version())
	if errors.Is(err, fs.ErrNotExist) {
		return writeFileAtomic(p.tmp(), p.version(), []byte(strconv.Itoa(layoutVersion)))
	}
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if v := strings.TrimSpace(string(b)); v != strconv.Itoa(layoutVersion) {
		return fmt.Errorf("cache: %s has layout version %q, this build uses %d", p.root, v, layoutVersion)
	}
	return nil
}

// isClosed reports whether Close has begun.
func (s *Store) isClosed() bool { return s.ctx.Err() != nil }

// Close aborts fills in flight (their received blocks are kept and recorded),
// waits for them and for the removal of what was evicted, and closes every
// file. Handles still open fail with ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	s.closeMu.Unlock()
	s.cancel()

	s.mu.Lock()
	all := make([]*item, 0, len(s.items))
	for _, it := range s.items {
		all = append(all, it)
	}
	s.mu.Unlock()
	for _, it := range all {
		it.mu.Lock()
		it.broadcastLocked() // waiters re-check and see the store closed
		it.mu.Unlock()
	}
	s.wg.Wait()
	// Fills and promotions are over, so nothing evicts any more; finish
	// the removals they queued while the directory lock is still held.
	s.closeJanitor()

	var errs []error
	for _, it := range all {
		it.mu.Lock()
		if it.file != nil {
			errs = append(errs, it.file.Close())
			it.file = nil
		}
		it.mu.Unlock()
	}
	errs = append(errs, s.lock.unlock())
	return errors.Join(errs...)
}

// Open returns a Handle reading f, filling it from o as needed. The Handle's
// reads wait (for fills or verification) only as long as ctx allows. Fills of
// bytes a read needs are detached from ctx and run to completion; read-ahead
// fills are cancelled once ctx ends or the Handle is closed, unless another
// reader has come to wait for them. With a nil o (offline) only bytes already
// present are served; reading others returns an error wrapping ErrNotCached.
func (s *Store) Open(ctx context.Context, f File, o Origin) (*Handle, error) {
	if err := validFile(f); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	if f.Size == 0 {
		if err := s.ensureEmptyBlob(f); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		it, err := s.acquire(f)
		if err != nil {
			return nil, err
		}
		file, err := s.openFile(it, f)
		if err != nil {
			s.release(it)
			// A blob deleted behind our back (e.g. huggingface-cli
			// delete-cache) is forgotten and fetched again.
			if attempt == 0 && it.complete.Load() && errors.Is(err, fs.ErrNotExist) {
				s.forget(it)
				continue
			}
			return nil, fmt.Errorf("cache: %w", err)
		}
		h := &Handle{s: s, it: it, origin: o, ctx: ctx, file: file}
		if !it.complete.Load() {
			// A complete item is never filled again, so its handles plan
			// no read-ahead for ctx's end or Close to cancel (stopAbandon
			// stays nil); registering on ctx, and locking the item on
			// Close, showed in profiles of warm small reads.
			h.stopAbandon = context.AfterFunc(ctx, h.abandon)
		}
		return h, nil
	}
}

// acquire finds or creates the item for f, takes a reference on it and marks
// it most recently used.
func (s *Store) acquire(f File) (*item, error) {
	key := itemKey{repo: f.Repo, etag: f.ETag}
	s.mu.Lock()
	defer s.mu.Unlock()
	it := s.items[key]
	if it == nil {
		it = newItem(key, f.Size, s.opts.BlockSize, s.paths, &s.used)
		// A blob may exist that this process did not index (written by
		// huggingface_hub into the shared tree, or by a previous run).
		if info, err := os.Stat(it.blobPath); err == nil && info.Mode().IsRegular() {
			if info.Size() != f.Size {
				return nil, fmt.Errorf("%w: blob %s has %d bytes, expected %d", ErrUncacheable, f.ETag, info.Size(), f.Size)
			}
			it.state = stateComplete
			it.complete.Store(true)
			it.addBytes(f.Size)
		}
		s.items[key] = it
		it.elem = s.lru.PushFront(it)
	} else if it.size != f.Size {
		return nil, fmt.Errorf("%w: etag %s is cached with %d bytes, expected %d", ErrUncacheable, f.ETag, it.size, f.Size)
	}
	it.refs.Add(1)
	if it.idleElem != nil {
		s.idle.Remove(it.idleElem) // referenced again: its open file is in use
		it.idleElem = nil
	}
	s.lru.MoveToFront(it.elem)
	if !it.complete.Load() {
		s.indexLinkLocked(it, linkKey{repo: f.Repo, commit: f.Commit, path: f.Path})
	}
	return it, nil
}

// indexLinkLocked records that a snapshot entry refers to partial item it.
func (s *Store) indexLinkLocked(it *item, k linkKey) {
	if have := s.links[k]; have == it {
		return
	} else if have != nil {
		s.unindexLinksLocked(have)
	}
	if len(s.index[it]) >= maxLinks {
		return
	}
	s.links[k] = it
	s.index[it] = append(s.index[it], k)
}

// unindexLinksLocked drops every snapshot entry of it from the Stat index.
func (s *Store) unindexLinksLocked(it *item) {
	for _, k := range s.index[it] {
		if s.links[k] == it {
			delete(s.links, k)
		}
	}
	delete(s.index, it)
}

// openFile opens the item's file if this is its first reference, records the
// (commit, path) link, and for a blob makes sure the snapshot symlink exists.
func (s *Store) openFile(it *item, f File) (*os.File, error) {
	it.mu.Lock()
	it.addLinkLocked(link{Commit: f.Commit, Path: f.Path})
	if it.file != nil && it.state == stateComplete && it.refs.Load() == 1 && unlinked(it.file) {
		// Kept open from an earlier reader, but the blob was deleted
		// behind the store's back (huggingface-cli delete-cache): the
		// open file still reads right, yet the cache no longer holds it.
		_ = it.file.Close()
		it.file = nil
		it.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", it.blobPath, fs.ErrNotExist)
	}
	if it.file == nil {
		if it.state == stateComplete {
			file, err := os.Open(it.blobPath)
			if err != nil {
				it.mu.Unlock()
				return nil, err
			}
			it.file = file
		} else {
			file, err := os.OpenFile(it.dataPath, os.O_RDWR|os.O_CREATE, fileMode)
			if err != nil {
				it.mu.Unlock()
				return nil, err
			}
			// The data file may have been truncated or deleted since the
			// present set was built; trust only bytes that exist.
			info, err := file.Stat()
			if err != nil {
				file.Close()
				it.mu.Unlock()
				return nil, err
			}
			it.dropBeyondLocked(info.Size())
			it.file = file
		}
	}
	file, complete := it.file, it.state == stateComplete
	promote := it.state == statePartial && it.present.Size() == it.size
	if promote {
		it.state = statePromoting
	}
	it.mu.Unlock()
	if promote {
		s.startPromote(it)
	}
	if complete {
		s.linkSnapshot(it, f)
	}
	return file, nil
}

// linkSnapshot makes sure the snapshot symlink of a blob opened as f
// exists, checking the disk only the first time this item is opened under
// that (commit, path): a hot file would otherwise cost a readlink per
// request. A link removed behind the store's back (a manual delete-cache)
// is recreated on the item's next load, not at once.
func (s *Store) linkSnapshot(it *item, f File) {
	l := link{Commit: f.Commit, Path: f.Path}
	it.mu.Lock()
	done := it.linked[l]
	it.mu.Unlock()
	if done {
		return
	}
	if err := s.paths.ensureSymlink(f.Repo, f.Commit, f.Path, f.ETag); err != nil {
		s.log.Warn("cache: snapshot symlink", "repo", f.Repo.String(), "path", f.Path, "err", err)
		return
	}
	it.mu.Lock()
	if it.linked == nil {
		it.linked = make(map[link]bool)
	}
	if len(it.linked) < maxLinks {
		it.linked[l] = true
	}
	it.mu.Unlock()
}

// release drops one reference. The last one closes the item's file, and an
// empty partial (opened but never filled) is deleted outright.
func (s *Store) release(it *item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it.refs.Add(-1) != 0 {
		return
	}
	it.mu.Lock()
	if it.state == stateComplete && it.file != nil && !it.removed && s.opts.OpenFiles > 0 {
		// Keep a verified blob's file open for the next reader, as a web
		// server's open-file cache does: a hot file then costs no open or
		// close per request.
		it.mu.Unlock()
		s.keepOpenLocked(it)
		return
	}
	file := it.file
	it.file = nil
	empty := it.state == statePartial && it.present.Size() == 0
	it.mu.Unlock()
	if file != nil {
		_ = file.Close()
	}
	if empty && !it.removed {
		s.removeLocked(it)
	}
}

// keepOpenLocked puts an unreferenced blob with an open file at the front
// of the idle list, closing the least recently used beyond OpenFiles.
func (s *Store) keepOpenLocked(it *item) {
	it.idleElem = s.idle.PushFront(it)
	for s.idle.Len() > s.opts.OpenFiles {
		s.closeIdleLocked(s.idle.Back().Value.(*item))
	}
}

// closeIdleLocked closes an idle blob's file and takes it off the idle list.
func (s *Store) closeIdleLocked(it *item) {
	if it.idleElem == nil {
		return
	}
	s.idle.Remove(it.idleElem)
	it.idleElem = nil
	it.mu.Lock()
	file := it.file
	it.file = nil
	it.mu.Unlock()
	if file != nil {
		_ = file.Close()
	}
}

// forget drops an item whose blob vanished from the index, without deleting
// anything, so the next Open starts a fresh partial.
func (s *Store) forget(it *item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it.removed || it.refs.Load() != 0 {
		return
	}
	s.detachLocked(it)
}
