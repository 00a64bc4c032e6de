package repofs

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// refusingUpstream refuses one credential the way the Hub refuses a token
// that lost access (403 GatedRepo), and serves everyone else. The refused
// caller's third request waits for release, so a test can line up who is
// waiting when the cache gives up on the block.
type refusingUpstream struct {
	fakeUpstream
	refused string // the Authorization refused
	third   chan struct{}
	release chan struct{}

	mu    sync.Mutex
	calls int
}

func (u *refusingUpstream) GetRange(ctx context.Context, url, auth string, want fetch.Want, off, n int64) (io.ReadCloser, error) {
	if auth != u.refused {
		return u.fakeUpstream.GetRange(ctx, url, auth, want, off, n)
	}
	u.mu.Lock()
	u.calls++
	call := u.calls
	u.mu.Unlock()
	if call == 3 {
		close(u.third)
		<-u.release
	}
	return nil, &fetch.StatusError{Code: http.StatusForbidden, ErrorCode: "GatedRepo", Message: "not in the authorized list"}
}

// Found by the soak (soak/): one caller's refusal must not become another
// caller's answer. When a repo turns gated, a token that lost access fails
// its fills with 403; a caller still allowed (here anonymous, through the
// proxy's own token) waiting on the same block used to inherit that 403
// once the block's fill attempts ran out, instead of being served (or
// refused on its own account).
func TestAnotherCallersRefusalIsNotMine(t *testing.T) {
	data := pattern(20000)
	store, err := cache.Open(cache.Options{Dir: t.TempDir(), BlockSize: 4096, ChunkSize: 16384})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	res := &fakeResolver{meta: resolver.Meta{FileMeta: fetch.FileMeta{Commit: commit, ETag: sha(data), Size: int64(len(data))}}}
	up := &refusingUpstream{fakeUpstream: fakeUpstream{data: data, expired: map[string]bool{}},
		refused: "Bearer carol", third: make(chan struct{}), release: make(chan struct{})}
	fs := New(res, store, up, Options{})

	carolCtx, leave := context.WithCancel(context.Background())
	carol, err := fs.Open(carolCtx, hub.NewCaller("Bearer carol"), hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer carol.Close()
	carolDone := make(chan error, 1)
	go func() {
		_, err := carol.ReadAt(make([]byte, 100), 0)
		carolDone <- err
	}()
	<-up.third // carol's third fill of block 0 is in flight

	anon, err := fs.Open(context.Background(), hub.Caller{}, hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	anonDone := make(chan error, 1)
	got := make([]byte, 100)
	go func() {
		_, err := anon.ReadAt(got, 0)
		anonDone <- err
	}()
	testutil.Eventually(t, 10*time.Second, "both readers waiting for carol's fill", func() bool { return store.Stats().Waiters == 2 })
	leave()
	if err := <-carolDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("carol, gone: %v", err)
	}
	close(up.release) // carol's third attempt fails: the block is exhausted

	select {
	case err := <-anonDone:
		if err != nil {
			t.Fatalf("the anonymous reader got another caller's refusal: %v", err)
		}
		if string(got) != string(data[:100]) {
			t.Fatal("wrong bytes")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the anonymous read hangs")
	}

	// Carol's own read still gets her own refusal, at once.
	again, err := fs.Open(context.Background(), hub.NewCaller("Bearer carol"), hub.FileRef{Repo: repo, Rev: "main", Path: "w.bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	var se *fetch.StatusError
	if _, err := again.ReadAt(make([]byte, 100), 8192); !errors.As(err, &se) || se.Code != http.StatusForbidden {
		t.Fatalf("carol's own read of a missing block: %v, want her 403", err)
	}
}
