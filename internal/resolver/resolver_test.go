package resolver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// fakeUpstream answers Resolve from a table and counts calls. gate, when set,
// holds every Resolve until it is closed.
type fakeUpstream struct {
	mu       sync.Mutex
	commit   string
	down     bool
	expired  map[string]bool // download URLs that answer ErrExpired
	resolves atomic.Int64
	gets     []string // URLs passed to GetRange
	gate     chan struct{}
}

func (f *fakeUpstream) Resolve(ctx context.Context, auth string, repo hub.Repo, rev, path string) (fetch.FileMeta, error) {
	f.resolves.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return fetch.FileMeta{}, fmt.Errorf("dial: %w", fetch.ErrUnavailable)
	}
	if auth == "Bearer denied" {
		return fetch.FileMeta{}, &fetch.StatusError{Code: 403, ErrorCode: "GatedRepo"}
	}
	n := f.resolves.Load()
	return fetch.FileMeta{Commit: f.commit, ETag: strings.Repeat("e", 64), Size: 10,
		DownloadURL: fmt.Sprintf("https://cdn/%s/%s?sig=%d", rev, path, n)}, nil
}

func (f *fakeUpstream) GetRange(ctx context.Context, rawURL, auth string, off, n int64) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets = append(f.gets, rawURL)
	if f.expired[rawURL] {
		return nil, fmt.Errorf("cdn 403: %w", fetch.ErrExpired)
	}
	return io.NopCloser(strings.NewReader(strings.Repeat("x", int(n)))), nil
}

// fakeStore keeps refs and snapshot entries in maps.
type fakeStore struct {
	mu    sync.Mutex
	refs  map[string]string
	files map[string]cache.File
	meta  map[string][]byte
}

func newFakeStore() *fakeStore {
	return &fakeStore{refs: map[string]string{}, files: map[string]cache.File{}, meta: map[string][]byte{}}
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
	repo    = hub.Repo{Type: hub.Model, ID: "org/m"}
	commitA = strings.Repeat("a", 40)
	commitB = strings.Repeat("b", 40)
)

func TestConcurrentResolvesShareOneRequest(t *testing.T) {
	up := &fakeUpstream{commit: commitA, gate: make(chan struct{})}
	r := New(up, newFakeStore(), Options{})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.File(context.Background(), "", repo, "main", "w.bin"); err != nil {
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
	if _, err := r.File(context.Background(), "", repo, "main", "w.bin"); err != nil || up.resolves.Load() != 1 {
		t.Errorf("cached answer not reused: %v, %d resolves", err, up.resolves.Load())
	}
}

func TestWaitHonoursContext(t *testing.T) {
	up := &fakeUpstream{commit: commitA, gate: make(chan struct{})}
	defer close(up.gate)
	r := New(up, newFakeStore(), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.File(ctx, "", repo, "main", "w.bin"); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestBranchExpiresCommitDoesNot(t *testing.T) {
	up := &fakeUpstream{commit: commitA}
	store := newFakeStore()
	r := New(up, store, Options{RevisionTTL: time.Millisecond})
	m, _ := r.File(context.Background(), "", repo, "main", "w.bin")
	if m.Commit != commitA || store.refs["org/m@main"] != commitA {
		t.Fatalf("first resolve: %+v, refs %v", m, store.refs)
	}
	up.mu.Lock()
	up.commit = commitB
	up.mu.Unlock()
	time.Sleep(3 * time.Millisecond)
	m, _ = r.File(context.Background(), "", repo, "main", "w.bin")
	if m.Commit != commitB || store.refs["org/m@main"] != commitB {
		t.Errorf("branch not re-resolved: %+v, refs %v", m, store.refs)
	}
	r.File(context.Background(), "", repo, commitA, "w.bin")
	n := up.resolves.Load()
	time.Sleep(3 * time.Millisecond)
	r.File(context.Background(), "", repo, commitA, "w.bin")
	if up.resolves.Load() != n {
		t.Error("a commit resolution expired with the revision TTL")
	}
	if _, ok := store.refs["org/m@"+commitA]; ok {
		t.Error("a ref was written for a commit")
	}
}

func TestAnswersAreNotSharedAcrossCredentials(t *testing.T) {
	up := &fakeUpstream{commit: commitA}
	r := New(up, newFakeStore(), Options{})
	if _, err := r.File(context.Background(), "Bearer ok", repo, "main", "w.bin"); err != nil {
		t.Fatal(err)
	}
	_, err := r.File(context.Background(), "Bearer denied", repo, "main", "w.bin")
	var se *fetch.StatusError
	if !errors.As(err, &se) || se.Code != 403 {
		t.Errorf("denied caller got %v, want the upstream's 403", err)
	}
}

func TestFallbackToCacheWhenUpstreamIsDown(t *testing.T) {
	up := &fakeUpstream{commit: commitA, down: true}
	store := newFakeStore()
	store.refs["org/m@main"] = commitA
	store.files[commitA+"/w.bin"] = cache.File{Repo: repo, Commit: commitA, Path: "w.bin", ETag: strings.Repeat("e", 64), Size: 10}
	r := New(up, store, Options{})
	// Nothing proves the repo public yet: fail closed.
	if _, err := r.File(context.Background(), "", repo, "main", "w.bin"); !errors.Is(err, ErrUnverifiable) {
		t.Fatalf("unverified repo served from cache: %v", err)
	}
	store.PutMeta(publicKey(repo), []byte("1")) // as an earlier anonymous success leaves it
	r = New(up, store, Options{})
	m, err := r.File(context.Background(), "", repo, "main", "w.bin")
	if err != nil || !m.FromCache || m.Commit != commitA || m.Size != 10 {
		t.Fatalf("fallback: %+v, %v", m, err)
	}
	if _, err := r.File(context.Background(), "", repo, "main", "other.bin"); !errors.Is(err, fetch.ErrUnavailable) {
		t.Errorf("uncached file: %v, want the upstream error", err)
	}
	off := New(up, store, Options{Offline: true})
	if _, err := off.File(context.Background(), "", repo, "main", "other.bin"); !errors.Is(err, ErrOffline) {
		t.Errorf("offline uncached: %v", err)
	}
	before := up.resolves.Load()
	if _, err := off.File(context.Background(), "", repo, "main", "w.bin"); err != nil || up.resolves.Load() != before {
		t.Errorf("offline mode contacted upstream or failed: %v", err)
	}
}

func TestOriginReresolvesExpiredURLAtTheCommit(t *testing.T) {
	up := &fakeUpstream{commit: commitA, expired: map[string]bool{}}
	r := New(up, newFakeStore(), Options{})
	m, err := r.File(context.Background(), "", repo, "main", "w.bin")
	if err != nil {
		t.Fatal(err)
	}
	o := r.Origin("", repo, "w.bin", m)
	up.mu.Lock()
	up.expired[m.DownloadURL] = true
	up.mu.Unlock()
	body, err := o.FetchRange(context.Background(), 0, 4)
	if err != nil {
		t.Fatalf("FetchRange after expiry: %v", err)
	}
	body.Close()
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.gets) != 2 || up.gets[0] == up.gets[1] || !strings.Contains(up.gets[1], "/"+commitA+"/") {
		t.Errorf("GETs %v: want a retry on a fresh URL resolved at the commit", up.gets)
	}
}

func TestVisibilityIsLearnedFromAnonymousAnswers(t *testing.T) {
	up := &fakeUpstream{commit: commitA}
	store := newFakeStore()
	var decisions []string
	r := New(up, store, Options{Observe: func(d string) { decisions = append(decisions, d) }})
	// A token holder's success proves nothing about anonymous access.
	r.File(context.Background(), "Bearer ok", repo, "main", "w.bin")
	if r.Public(repo) {
		t.Fatal("a token holder's access made the repo public")
	}
	r.File(context.Background(), "", repo, "main", "w.bin")
	if !r.Public(repo) || string(store.meta[publicKey(repo)]) != "1" {
		t.Fatal("an anonymous success did not mark the repo public (persistently)")
	}
	// A fresh resolver (a restart) remembers it.
	if !New(up, store, Options{}).Public(repo) {
		t.Error("visibility lost across restart")
	}
	r.File(context.Background(), "Bearer denied", repo, "main", "other.bin")
	if fmt.Sprint(decisions) != "[allowed allowed denied]" {
		t.Errorf("decisions %v", decisions)
	}
}

func TestDecisionsExpireAfterAccessTTL(t *testing.T) {
	up := &fakeUpstream{commit: commitA}
	r := New(up, newFakeStore(), Options{AccessTTL: time.Millisecond})
	r.File(context.Background(), "Bearer ok", repo, commitA, "w.bin")
	r.File(context.Background(), "", repo, commitA, "w.bin")
	n := up.resolves.Load()
	time.Sleep(3 * time.Millisecond)
	r.File(context.Background(), "Bearer ok", repo, commitA, "w.bin")
	r.File(context.Background(), "", repo, commitA, "w.bin")
	if got := up.resolves.Load() - n; got != 2 {
		t.Errorf("%d re-resolves after the access TTL, want 2 (anonymous decisions expire too)", got)
	}
}
