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
//
// The shared store, when there is one, is reported the same way and for the
// same reason never makes the proxy unready: without it a node serves from
// upstream. A store found down is probed again in the background (at most
// once per storeProbeEvery), so a node with no traffic sees it come back.
type readiness struct {
	dir     string
	offline bool
	up      upstreamHealth
	store   storeHealth // nil without shared-store

	mu          sync.Mutex
	probed      time.Time // guarded by mu
	storeProbed time.Time // guarded by mu
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

const storeProbeEvery = 5 * time.Second

func newReadiness(dir string, offline bool, up upstreamHealth, store storeHealth) *readiness {
	return &readiness{dir: dir, offline: offline, up: up, store: store}
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
	r.checkStore(&rd)
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

// checkStore reports the shared store's state, and probes it in the
// background while it is down.
func (r *readiness) checkStore(rd *server.Readiness) {
	if r.store == nil {
		return
	}
	h := r.store.Health()
	if h.Up {
		rd.Store = "up"
		return
	}
	since := h.Since.UTC()
	rd.Store, rd.StoreDownSince, rd.StoreReason = "down", &since, h.Reason
	r.mu.Lock()
	due := time.Since(r.storeProbed) >= storeProbeEvery
	if due {
		r.storeProbed = time.Now()
	}
	r.mu.Unlock()
	if due {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), readyProbeTimeout)
			defer cancel()
			_ = r.store.Probe(ctx) // the outcome lands in Health
		}()
	}
}
