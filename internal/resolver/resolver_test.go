package resolver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// fakeUpstream answers like a hub holding repo "org/m" with one commit whose
// files are w.bin and x.bin, and counts calls. gated makes the repo refuse
// every caller but "Bearer ok" (GatedRepo: 401 anonymous, 403 otherwise);
// "Bearer denied" is always refused. gate, when set, holds every Resolve
// until it is closed.
type fakeUpstream struct {
	mu       sync.Mutex
	commit   string
	down     bool
	gated    bool
	resolves atomic.Int64
	probes   atomic.Int64
	gate     chan struct{}
}

func (f *fakeUpstream) refuse(auth string) error {
	if auth == "Bearer denied" || f.gated && auth != "Bearer ok" {
		code := 403
		if auth == "" {
			code = 401
		}
		return &fetch.StatusError{Code: code, ErrorCode: "GatedRepo"}
	}
	return nil
}

func (f *fakeUpstream) Resolve(ctx context.Context, auth string, file hub.FileRef) (fetch.FileMeta, error) {
	f.resolves.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return fetch.FileMeta{}, fmt.Errorf("dial: %w", fetch.ErrUnavailable)
	}
	if err := f.refuse(auth); err != nil {
		return fetch.FileMeta{}, err
	}
	if file.Path != "w.bin" && file.Path != "x.bin" {
		return fetch.FileMeta{}, &fetch.StatusError{Code: 404, ErrorCode: "EntryNotFound", RepoCommit: f.commit}
	}
	n := f.resolves.Load()
	return fetch.FileMeta{Commit: f.commit, ETag: strings.Repeat("e", 64), Size: 10,
		DownloadURL: fmt.Sprintf("https://cdn/%s/%s?sig=%d", file.Rev, file.Path, n)}, nil
}

func (f *fakeUpstream) Visibility(ctx context.Context, repo hub.Repo) (fetch.Visibility, error) {
	f.probes.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return fetch.Visibility{}, fmt.Errorf("dial: %w", fetch.ErrUnavailable)
	}
	return fetch.Visibility{Gated: f.gated}, nil
}

func (f *fakeUpstream) set(fn func(*fakeUpstream)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// fakeStore keeps refs, snapshot entries, missing-file markers and meta
// documents in maps.
type fakeStore struct {
	mu      sync.Mutex
	refs    map[string]string
	files   map[string]cache.File
	meta    map[string][]byte
	noExist map[string]bool
}

func newFakeStore() *fakeStore {
	return &fakeStore{refs: map[string]string{}, files: map[string]cache.File{}, meta: map[string][]byte{}, noExist: map[string]bool{}}
}

func (s *fakeStore) WriteNoExist(repo hub.Repo, commit, path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noExist[commit+"/"+path] = true
	return nil
}

func (s *fakeStore) NoExist(repo hub.Repo, commit, path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noExist[commit+"/"+path]
}

// holds puts a complete file w.bin or x.bin at commit in the snapshot.
func (s *fakeStore) holds(commit, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[commit+"/"+path] = cache.File{Repo: repo, Commit: commit, Path: path, ETag: strings.Repeat("e", 64), Size: 10}
}

func (s *fakeStore) PutMeta(key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.meta[key] = data
	return nil
}

func (s *fakeStore) GetMeta(key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.meta[key]; ok {
		return b, nil
	}
	return nil, cache.ErrNotCached
}

func (s *fakeStore) WriteRef(repo hub.Repo, rev, commit string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs[repo.String()+"@"+rev] = commit
	return nil
}

func (s *fakeStore) ReadRef(repo hub.Repo, rev string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.refs[repo.String()+"@"+rev]; ok {
		return c, nil
	}
	return "", cache.ErrNotCached
}

func (s *fakeStore) Stat(repo hub.Repo, commit, path string) (cache.File, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.files[commit+"/"+path]; ok {
		return f, true, nil
	}
	return cache.File{}, false, cache.ErrNotCached
}

var (
	repo    = hub.MustRepo(hub.Model, "org/m")
	commitA = strings.Repeat("a", 40)
	commitB = strings.Repeat("b", 40)
)

func newClock() *testutil.Clock {
	return testutil.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

// newResolver builds a resolver on clk (nil: a fresh clock) that is closed
// when the test ends.
func newResolver(t *testing.T, up *fakeUpstream, store *fakeStore, clk *testutil.Clock, opts Options) *Resolver {
	t.Helper()
	if clk == nil {
		clk = newClock()
	}
	opts.Now = clk.Now
	r := New(up, store, opts)
	t.Cleanup(func() { r.Close() })
	return r
}

func TestConcurrentResolvesShareOneRequest(t *testing.T) {
	up := &fakeUpstream{commit: commitA, gate: make(chan struct{})}
	r := newResolver(t, up, newFakeStore(), nil, Options{})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.File(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"}); err != nil {
				t.Error(err)
			}
		}()
	}
	// Let every caller join the flight before upstream answers.
	for up.resolves.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(up.gate)
	wg.Wait()
	if n := up.resolves.Load(); n != 1 {
		t.Errorf("%d upstream resolves for 20 concurrent callers, want 1", n)
	}
	if _, err := r.File(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"}); err != nil || up.resolves.Load() != 1 {
		t.Errorf("cached answer not reused: %v, %d resolves", err, up.resolves.Load())
	}
}

func TestWaitHonoursContext(t *testing.T) {
	up := &fakeUpstream{commit: commitA, gate: make(chan struct{})}
	defer close(up.gate)
	r := newResolver(t, up, newFakeStore(), nil, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.File(ctx, hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestBranchExpiresCommitDoesNot(t *testing.T) {
	up := &fakeUpstream{commit: commitA}
	store := newFakeStore()
	clk := newClock()
	r := newResolver(t, up, store, clk, Options{RevisionTTL: time.Second, AccessTTL: time.Hour, URLTTL: time.Hour})
	m, _ := r.File(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if m.Commit != commitA || store.refs["org/m@main"] != commitA {
		t.Fatalf("first resolve: %+v, refs %v", m, store.refs)
	}
	up.set(func(f *fakeUpstream) { f.commit = commitB })
	clk.Advance(2 * time.Second)
	m, _ = r.File(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if m.Commit != commitB || store.refs["org/m@main"] != commitB {
		t.Errorf("branch not re-resolved: %+v, refs %v", m, store.refs)
	}
	r.File(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: commitA, Path: "w.bin"})
	n := up.resolves.Load()
	clk.Advance(2 * time.Second)
	r.File(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: commitA, Path: "w.bin"})
	if up.resolves.Load() != n {
		t.Error("a commit resolution expired with the revision TTL")
	}
	if _, ok := store.refs["org/m@"+commitA]; ok {
		t.Error("a ref was written for a commit")
	}
}

// Resolving a branch also answers its commit, for the same caller: the
// tensor path and fills open the file again at the commit it resolved to,
// and that must not cost a second round trip upstream.
func TestBranchAnswerServesItsCommit(t *testing.T) {
	up := &fakeUpstream{commit: commitA}
	r := newResolver(t, up, newFakeStore(), nil, Options{})
	tok := hub.NewCaller("Bearer ok")
	m, err := r.File(context.Background(), tok, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil || m.Commit != commitA {
		t.Fatalf("resolve main: %+v, %v", m, err)
	}
	at, err := r.File(context.Background(), tok, hub.FileRef{Repo: repo, Rev: commitA, Path: "w.bin"})
	if err != nil || at.FileMeta != m.FileMeta {
		t.Fatalf("resolve at the commit: %+v, %v; want %+v", at, err, m)
	}
	if n := up.resolves.Load(); n != 1 {
		t.Errorf("%d upstream resolves for main and then its commit, want 1", n)
	}
	// Another caller's answer is its own.
	if _, err := r.File(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: commitA, Path: "w.bin"}); err != nil || up.resolves.Load() != 2 {
		t.Errorf("anonymous at the commit: %v, %d resolves; want its own resolve", err, up.resolves.Load())
	}
}

func TestAnswersAreNotSharedAcrossCredentials(t *testing.T) {
	up := &fakeUpstream{commit: commitA}
	r := newResolver(t, up, newFakeStore(), nil, Options{})
	if _, err := r.File(context.Background(), hub.NewCaller("Bearer ok"), hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"}); err != nil {
		t.Fatal(err)
	}
	_, err := r.File(context.Background(), hub.NewCaller("Bearer denied"), hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	var se *fetch.StatusError
	if !errors.As(err, &se) || se.Code != 403 {
		t.Errorf("denied caller got %v, want the upstream's 403", err)
	}
}

func TestDecisionsExpireAfterAccessTTL(t *testing.T) {
	up := &fakeUpstream{commit: commitA}
	clk := newClock()
	r := newResolver(t, up, newFakeStore(), clk, Options{AccessTTL: time.Second})
	r.File(context.Background(), hub.NewCaller("Bearer ok"), hub.FileRef{Repo: repo, Rev: commitA, Path: "w.bin"})
	r.File(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: commitA, Path: "w.bin"})
	n := up.resolves.Load()
	clk.Advance(2 * time.Second)
	r.File(context.Background(), hub.NewCaller("Bearer ok"), hub.FileRef{Repo: repo, Rev: commitA, Path: "w.bin"})
	r.File(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: commitA, Path: "w.bin"})
	if got := up.resolves.Load() - n; got != 2 {
		t.Errorf("%d re-resolves after the access TTL, want 2 (anonymous decisions expire too)", got)
	}
}
