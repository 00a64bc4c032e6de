package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// read resolves w.bin or x.bin at main for auth and reports the outcome as
// "ok", "cache" (served without upstream), "unverifiable" or the error.
func read(r *Resolver, auth, path string) string {
	m, err := r.File(context.Background(), hub.NewCaller(auth), hub.FileRef{Repo: repo, Rev: "main", Path: path})
	switch {
	case err == nil && m.FromCache:
		return "cache"
	case err == nil:
		return "ok"
	case errors.Is(err, ErrUnverifiable):
		return "unverifiable"
	}
	var se *fetch.StatusError
	if errors.As(err, &se) {
		return fmt.Sprintf("%d %s", se.Code, se.ErrorCode)
	}
	return err.Error()
}

// A repo that was public, then turned gated: a granted caller fills a file;
// during an outage neither anonymous nor refused callers get it, nor the file
// anonymous callers read while the repo was public. Only the granted caller,
// within access-ttl, keeps access.
func TestOutageNeverServesGatedFilesToRefusedCallers(t *testing.T) {
	up := &fakeUpstream{commit: commitA}
	store := newFakeStore()
	clk := newClock()
	r := newResolver(t, up, store, clk, Options{AccessTTL: time.Minute})
	if got := read(r, "", "x.bin"); got != "ok" {
		t.Fatalf("anonymous read while public: %s", got)
	}
	store.holds(commitA, "x.bin")
	up.set(func(f *fakeUpstream) { f.gated = true })
	clk.Advance(2 * time.Second)
	if got := read(r, "Bearer ok", "w.bin"); got != "ok" {
		t.Fatalf("granted caller: %s", got)
	}
	store.holds(commitA, "w.bin")
	if up.probes.Load() == 0 {
		t.Fatal("a credential's success did not ask upstream whether the repo is public")
	}
	up.set(func(f *fakeUpstream) { f.down = true })
	clk.Advance(2 * time.Minute) // every cached decision has expired
	for _, c := range []struct{ auth, path, want string }{
		{"", "w.bin", "unverifiable"},
		{"", "x.bin", "unverifiable"}, // read anonymously, but the repo is gated since
		{"Bearer denied", "w.bin", "unverifiable"},
		{"Bearer other", "x.bin", "unverifiable"},
		{"Bearer ok", "w.bin", "unverifiable"}, // its grant is older than access-ttl
	} {
		if got := read(r, c.auth, c.path); got != c.want {
			t.Errorf("outage, %q reads %s: %s, want %s", c.auth, c.path, got, c.want)
		}
	}
}

// With outage-grace, a caller upstream granted the repo within the grace
// keeps reading its cached files during an outage; nobody else does, and a
// later refusal ends the grace.
func TestOutageGraceCoversOnlyGrantedCallers(t *testing.T) {
	up := &fakeUpstream{commit: commitA, gated: true}
	store := newFakeStore()
	store.holds(commitA, "w.bin")
	clk := newClock()
	r := newResolver(t, up, store, clk, Options{AccessTTL: time.Minute, OutageGrace: 24 * time.Hour})
	read(r, "Bearer ok", "w.bin")
	read(r, "Bearer denied", "w.bin")
	up.set(func(f *fakeUpstream) { f.down = true })
	clk.Advance(3 * time.Hour)
	for _, c := range []struct{ auth, want string }{
		{"Bearer ok", "cache"}, {"", "unverifiable"}, {"Bearer denied", "unverifiable"}, {"Bearer new", "unverifiable"},
	} {
		if got := read(r, c.auth, "w.bin"); got != c.want {
			t.Errorf("%q: %s, want %s", c.auth, got, c.want)
		}
	}
	// A restart during the outage keeps what was learnt.
	r.Close()
	r2 := newResolver(t, up, store, clk, Options{AccessTTL: time.Minute, OutageGrace: 24 * time.Hour})
	if got := read(r2, "Bearer ok", "w.bin"); got != "cache" {
		t.Errorf("after a restart: %s, want cache", got)
	}
	clk.Advance(22 * time.Hour)
	if got := read(r2, "Bearer ok", "w.bin"); got != "unverifiable" {
		t.Errorf("after the grace: %s, want unverifiable", got)
	}
}

// A public repo read only with tokens (clusters that set HF_TOKEN
// everywhere) is known public from what upstream says of the repo itself,
// so its cached files are served to everyone during an outage.
func TestPublicRepoReadWithTokensStaysServedInAnOutage(t *testing.T) {
	up := &fakeUpstream{commit: commitA}
	store := newFakeStore()
	store.holds(commitA, "w.bin")
	clk := newClock()
	r := newResolver(t, up, store, clk, Options{AccessTTL: time.Minute, PublicTTL: time.Hour})
	if got := read(r, "Bearer ok", "w.bin"); got != "ok" {
		t.Fatal(got)
	}
	up.set(func(f *fakeUpstream) { f.down = true })
	clk.Advance(10 * time.Minute)
	for _, auth := range []string{"", "Bearer ok", "Bearer someone"} {
		if got := read(r, auth, "w.bin"); got != "cache" {
			t.Errorf("%q during the outage: %s, want cache", auth, got)
		}
	}
	clk.Advance(time.Hour)
	if got := read(r, "", "w.bin"); got != "unverifiable" {
		t.Errorf("past public-ttl: %s, want unverifiable", got)
	}
}

// A file's absence at a commit is kept: asked again, it is answered without
// upstream to callers with a live decision, and during an outage as the
// policy allows; a refused caller never learns it from the cache.
func TestMissingFilesAreRemembered(t *testing.T) {
	up := &fakeUpstream{commit: commitA}
	store := newFakeStore()
	clk := newClock()
	r := newResolver(t, up, store, clk, Options{AccessTTL: time.Minute})
	if got := read(r, "", "adapter_config.json"); got != "404 EntryNotFound" {
		t.Fatalf("first ask: %s", got)
	}
	if !store.NoExist(repo, commitA, "adapter_config.json") {
		t.Fatal("no .no_exist marker written")
	}
	n := up.resolves.Load()
	_, err := r.File(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "adapter_config.json"})
	var se *fetch.StatusError
	if !errors.As(err, &se) || se.ErrorCode != "EntryNotFound" || se.RepoCommit != commitA || up.resolves.Load() != n {
		t.Fatalf("second ask: %v (commit %q), %d new resolves", err, se.RepoCommit, up.resolves.Load()-n)
	}
	// Outage, long after every decision: the repo was read anonymously.
	up.set(func(f *fakeUpstream) { f.down = true })
	clk.Advance(time.Hour)
	if got := read(r, "", "adapter_config.json"); got != "404 EntryNotFound" {
		t.Errorf("during an outage: %s, want 404 EntryNotFound", got)
	}
	// A caller upstream refuses is asked upstream, and refused. (Last: this
	// fake refuses it with GatedRepo while its probe says the repo is
	// public, and which of the two the policy hears last is a race.)
	up.set(func(f *fakeUpstream) { f.down = false })
	if got := read(r, "Bearer denied", "adapter_config.json"); got != "403 GatedRepo" {
		t.Errorf("refused caller: %s", got)
	}
}

// The probe's answer and the grants survive in the store, and the records
// stay bounded however many paths and tokens callers use.
func TestPolicyRecordsAreBounded(t *testing.T) {
	store := newFakeStore()
	clk := newClock()
	p := newPolicy(store, clk.Now, time.Minute, time.Hour, 0, nil)
	p.log = discardLogger()
	for i := range maxAnonymousPerRepo + 50 {
		p.servedAnonymously(repo, commitA, fmt.Sprintf("f%d", i))
		clk.Advance(time.Millisecond)
	}
	for i := range maxGrantsPerRepo + 50 {
		p.grantedFile(hub.NewCaller(fmt.Sprintf("caller%d", i)), repo)
	}
	if err := p.flush(); err != nil {
		t.Fatal(err)
	}
	p2 := newPolicy(store, clk.Now, time.Minute, time.Hour, 0, discardLogger())
	p2.mu.Lock()
	rec := p2.recordLocked(repo)
	p2.mu.Unlock()
	if len(rec.Anonymous) != maxAnonymousPerRepo || len(rec.Files) != maxGrantsPerRepo {
		t.Errorf("record holds %d files, %d grants", len(rec.Anonymous), len(rec.Files))
	}
	if _, ok := rec.Anonymous[commitA+"/f0"]; ok {
		t.Error("the oldest file was kept")
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// A metadata answer (repo info, tree, paths-info: public on the Hub even
// for a gated repo) is a grant of metadata only: in an outage it lets the
// caller replay cached metadata, never have the repo's files.
func TestMetadataAnswersAreNotFileGrants(t *testing.T) {
	up := &fakeUpstream{commit: commitA, gated: true}
	store := newFakeStore()
	store.holds(commitA, "w.bin")
	clk := newClock()
	r := newResolver(t, up, store, clk, Options{AccessTTL: time.Minute})
	if got := read(r, "Bearer ok", "w.bin"); got != "ok" {
		t.Fatalf("granted caller: %s", got)
	}
	for _, auth := range []string{"", "Bearer denied"} {
		r.AnsweredMetadata(hub.NewCaller(auth), repo, nil)
	}
	up.set(func(f *fakeUpstream) { f.down = true })
	clk.Advance(time.Second)
	for _, auth := range []string{"", "Bearer denied"} {
		if got := read(r, auth, "w.bin"); got != "unverifiable" {
			t.Errorf("%q after a metadata answer, in an outage: %s, want unverifiable", auth, got)
		}
	}
	if err := r.MayReplayMetadata(hub.NewCaller("Bearer denied"), repo, time.Time{}); err != nil {
		t.Errorf("a token may not replay its own cached metadata: %v", err)
	}
	// Anonymous callers share one identity, so they hold no metadata grant:
	// their cached answer replays by its own time only.
	if err := r.MayReplayMetadata(hub.Caller{}, repo, time.Time{}); !errors.Is(err, ErrUnverifiable) {
		t.Errorf("anonymous replay without an answer's time: %v", err)
	}
	if err := r.MayReplayMetadata(hub.Caller{}, repo, clk.Now()); err != nil {
		t.Errorf("anonymous replay of its own recent answer: %v", err)
	}
	if err := r.MayReplayMetadata(hub.NewCaller("Bearer other"), repo, time.Time{}); !errors.Is(err, ErrUnverifiable) {
		t.Errorf("a caller upstream never answered replays metadata: %v", err)
	}
}

// Only a resolve that returned a file's metadata grants the files: an
// EntryNotFound does not.
func TestNotFoundAnswersAreNotGrants(t *testing.T) {
	up := &fakeUpstream{commit: commitA, gated: true}
	store := newFakeStore()
	store.holds(commitA, "w.bin")
	clk := newClock()
	r := newResolver(t, up, store, clk, Options{AccessTTL: time.Minute})
	if got := read(r, "Bearer ok", "adapter_config.json"); got != "404 EntryNotFound" {
		t.Fatalf("missing file: %s", got)
	}
	up.set(func(f *fakeUpstream) { f.down = true })
	clk.Advance(time.Second)
	if got := read(r, "Bearer ok", "w.bin"); got != "unverifiable" {
		t.Errorf("after only an EntryNotFound, in an outage: %s, want unverifiable", got)
	}
}

// Records written by earlier versions counted metadata answers as grants;
// they are not trusted after an upgrade.
func TestOldGrantsAreDroppedOnUpgrade(t *testing.T) {
	store := newFakeStore()
	clk := newClock()
	old := fmt.Sprintf(`{"grants":{%q:%q}}`, hub.NewCaller("Bearer denied").ID(), clk.Now().Format(time.RFC3339Nano))
	if err := store.PutMeta(policyKey(repo), []byte(old)); err != nil {
		t.Fatal(err)
	}
	p := newPolicy(store, clk.Now, time.Minute, time.Hour, 0, discardLogger())
	if _, err := p.fallback(hub.NewCaller("Bearer denied"), repo, time.Time{}); !errors.Is(err, ErrUnverifiable) {
		t.Errorf("an old-format grant was trusted: %v", err)
	}
}

// slowStore is a fakeStore whose PutMeta waits for release once armed, so a
// test can act while flush is writing.
type slowStore struct {
	*fakeStore
	armed   chan struct{} // closed by the armed PutMeta when it starts
	release chan struct{}
	once    sync.Once
}

func (s *slowStore) PutMeta(key string, data []byte) error {
	if s.armed != nil {
		s.once.Do(func() { close(s.armed) })
		<-s.release
	}
	return s.fakeStore.PutMeta(key, data)
}

// A record evicted from memory while flush writes it is not reloaded from
// the older copy in the store: here that copy says "public", and reading it
// back would hand the repo's files to anyone in an outage.
func TestRecordBeingFlushedIsNotReloadedStale(t *testing.T) {
	store := &slowStore{fakeStore: newFakeStore()}
	clk := newClock()
	p := newPolicy(store, clk.Now, time.Minute, time.Hour, 0, discardLogger())
	p.visible(repo, true, clk.Now())
	if err := p.flush(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	p.refused(hub.Caller{}, repo, &fetch.StatusError{Code: 401, ErrorCode: "GatedRepo"})
	store.armed, store.release = make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- p.flush() }()
	<-store.armed
	p.mu.Lock()
	for i := range maxRecords + 1 { // push repo out of the loaded records
		p.recordLocked(hub.MustRepo(hub.Model, fmt.Sprintf("org/other%d", i)))
	}
	p.mu.Unlock()
	_, err := p.fallback(hub.Caller{}, repo, time.Time{})
	close(store.release)
	if ferr := <-done; ferr != nil {
		t.Fatal(ferr)
	}
	if !errors.Is(err, ErrUnverifiable) {
		t.Errorf("during a flush, a stale public belief came back: %v", err)
	}
}

// A probe asked before a refusal that says the repo is not public (it
// turned gated in between) may answer after it; its "public" must not undo
// the refusal, or anonymous callers would get the gated files in an outage.
func TestLateProbeDoesNotUndoARefusal(t *testing.T) {
	clk := newClock()
	p := newPolicy(newFakeStore(), clk.Now, time.Minute, time.Hour, 0, discardLogger())
	asked := clk.Now()
	clk.Advance(time.Millisecond)
	p.refused(hub.Caller{}, repo, &fetch.StatusError{Code: 401, ErrorCode: "GatedRepo"})
	p.visible(repo, true, asked) // the probe's answer lands last
	if _, err := p.fallback(hub.Caller{}, repo, time.Time{}); !errors.Is(err, ErrUnverifiable) {
		t.Errorf("a probe older than the refusal made the repo public: %v", err)
	}
	clk.Advance(time.Second)
	p.visible(repo, true, clk.Now()) // a probe asked after it may
	if _, err := p.fallback(hub.Caller{}, repo, time.Time{}); err != nil {
		t.Errorf("a newer probe's public answer was ignored: %v", err)
	}
}

// The Hub matches repo ids without case, so what the policy knows of a repo
// holds for every casing a caller uses: a refusal learnt through one ends
// the grant through another.
func TestPolicyFoldsRepoIDCase(t *testing.T) {
	clk := newClock()
	p := newPolicy(newFakeStore(), clk.Now, time.Minute, time.Hour, 0, discardLogger())
	lower, upper := hub.MustRepo(hub.Model, "org/m"), hub.MustRepo(hub.Model, "Org/M")
	tok := hub.NewCaller("Bearer ok")
	p.grantedFile(tok, lower)
	if !p.live(tok, upper) {
		t.Fatal("a grant through org/m does not count for Org/M")
	}
	p.refused(tok, upper, &fetch.StatusError{Code: 403, ErrorCode: "GatedRepo"})
	if p.live(tok, lower) {
		t.Error("a refusal through Org/M left the grant through org/m live")
	}
}
