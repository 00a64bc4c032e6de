package app

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// readiness answers /readyz: the cache directory must be writable, and the
// upstream must answer HTTP at all (any status) unless offline mode is on. The
// upstream probe is remembered for a few seconds so probes from a kubelet
// never become load on the hub.
type readiness struct {
	dir       string
	upstream  string
	offline   bool
	transport http.RoundTripper

	mu      sync.Mutex
	checked time.Time // guarded by mu
	last    error     // guarded by mu
}

const readyProbeTTL = 10 * time.Second

func newReadiness(dir, upstream string, offline bool, tr http.RoundTripper) *readiness {
	return &readiness{dir: dir, upstream: upstream, offline: offline, transport: tr}
}

func (r *readiness) check(ctx context.Context) error {
	tmp := filepath.Join(r.dir, ".hubproxy", "tmp")
	f, err := os.CreateTemp(tmp, "ready-*")
	if err != nil {
		return fmt.Errorf("cache directory not writable: %w", err)
	}
	f.Close()
	os.Remove(f.Name())
	if r.offline {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < readyProbeTTL {
		return r.last
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, r.upstream, nil)
	if err == nil {
		var resp *http.Response
		if resp, err = r.transport.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	r.checked, r.last = time.Now(), nil
	if err != nil {
		r.last = fmt.Errorf("upstream unreachable")
	}
	return r.last
}
