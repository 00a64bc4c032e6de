package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/server"
)

// readiness answers /readyz. Ready means "can serve": the cache directory is
// writable. The upstream's state is reported beside it but never makes the
// proxy unready: with the hub down, the cache is what clients need most, and
// an unready sidecar would take its inference pod out of service too.
//
// The upstream's state is what calls to it last showed (fetch's breaker).
// When nothing has gone upstream for a while, a probe asks (at most once per
// readyProbeEvery), so the state, and hubproxy_upstream_up, stay current on an
// idle proxy without turning kubelet probes into load on the hub.
type readiness struct {
	dir     string
	offline bool
	up      upstreamHealth

	mu     sync.Mutex
	probed time.Time // guarded by mu
}

// upstreamHealth is what readiness needs of the upstream client.
type upstreamHealth interface {
	Health() fetch.Health
	Ping(ctx context.Context) error
}

const (
	readyProbeEvery   = 30 * time.Second
	readyProbeTimeout = 10 * time.Second
)

func newReadiness(dir string, offline bool, up upstreamHealth) *readiness {
	return &readiness{dir: dir, offline: offline, up: up}
}

func (r *readiness) check(ctx context.Context) server.Readiness {
	rd := server.Readiness{Ready: true, Cache: "ok", Upstream: "offline"}
	tmp := filepath.Join(r.dir, ".hubproxy", "tmp")
	if f, err := os.CreateTemp(tmp, "ready-*"); err != nil {
		rd.Ready, rd.Cache = false, fmt.Sprintf("not writable: %v", err)
	} else {
		f.Close()
		os.Remove(f.Name())
	}
	if r.offline {
		return rd
	}
	r.maybeProbe(ctx)
	h := r.up.Health()
	rd.Upstream = "up"
	if !h.Up {
		since := h.Since.UTC()
		rd.Upstream, rd.UpstreamDownSince, rd.UpstreamReason = "down", &since, h.Reason
	}
	return rd
}

// maybeProbe pings the upstream when no call has told its state lately. The
// ping runs in the background: /readyz answers at once with what is known, so
// a hung hub never makes the kubelet's probe time out. A fresh proxy's first
// answer waits a little for the ping, so it starts with a real state.
func (r *readiness) maybeProbe(ctx context.Context) {
	now := time.Now()
	h := r.up.Health()
	if now.Sub(h.Checked) < readyProbeEvery {
		return
	}
	r.mu.Lock()
	if now.Sub(r.probed) < readyProbeEvery {
		r.mu.Unlock()
		return
	}
	r.probed = now
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pctx, cancel := context.WithTimeout(context.Background(), readyProbeTimeout)
		defer cancel()
		_ = r.up.Ping(pctx) // the outcome lands in Health
	}()
	if h.Checked.IsZero() {
		select {
		case <-done:
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
