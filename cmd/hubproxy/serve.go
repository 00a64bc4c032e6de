package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/secret"
)

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the hub API, caching files from upstream",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := load(cmd.Flags())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return serve(ctx, l)
		},
	}
	addServeFlags(cmd.Flags())
	return cmd
}

// serve runs hubproxy until ctx ends, then drains in-flight requests.
func serve(ctx context.Context, l loaded) error {
	cfg := l.cfg
	bi := readBuildInfo(version, buildCommit)
	cfg.Version, cfg.Commit = bi.Version, bi.Commit
	log, err := newLogger(cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return err
	}
	log.Info("configuration (hubproxy config shows where each key comes from)", l.logAttrs()...)
	h, err := app.Build(cfg, log)
	if err != nil {
		return secret.Error(err) // it may quote a configured URL
	}
	defer h.Close()
	ln, err := listenMain(cfg, h.Metrics)
	if err != nil {
		return err
	}
	var inflight atomic.Int64 // requests being served, for the shutdown log
	srv := newMainServer(cfg, h.Main, &inflight)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("hubproxy serving", "addr", ln.Addr().String(), "upstream", secret.URL(cfg.Upstream), "cache_dir", cfg.CacheDir, "offline", cfg.Offline,
		"max_connections", cfg.MaxConnections, "request_read_timeout", cfg.RequestReadTimeout.String())
	if cfg.AdminListen != "" {
		aln, err := listenAdmin(cfg.AdminListen)
		if err != nil {
			// The hub API is what clients need; a missing admin socket
			// (e.g. no /run/hubproxy outside a container) is not fatal.
			log.Warn("admin API disabled", "admin_listen", cfg.AdminListen, "err", err)
		} else {
			// ConnContext reads each connection's peer credentials, which
			// decide whose GPU leases a caller may see and end.
			adminSrv := &http.Server{Handler: h.Admin, ConnContext: admin.ConnContext,
				ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
			go adminSrv.Serve(aln)
			// Runs before the cache and GPU are closed (defers unwind in
			// reverse): a staging in progress finishes first.
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), max(cfg.ShutdownTimeout, time.Second))
				defer cancel()
				adminSrv.Shutdown(sctx)
			}()
			log.Info("admin API serving", "addr", aln.Addr().String())
		}
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return drain(srv, &inflight, cfg.ShutdownTimeout, log)
}

// drain stops accepting connections and lets requests in flight finish for
// up to timeout; those still running then are cut, and said so. Either way
// the shutdown is orderly (exit 0): the cache closes cleanly afterwards and
// keeps every byte fills had written.
func drain(srv *http.Server, inflight *atomic.Int64, timeout time.Duration, log *slog.Logger) error {
	if timeout <= 0 {
		timeout = app.Defaults().ShutdownTimeout
	}
	log.Info("shutting down: draining requests in flight", "in_flight", inflight.Load(), "timeout", timeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		cut := inflight.Load()
		srv.Close()
		log.Warn("shutdown: drain time is over; cut the transfers still running", "cut", cut, "timeout", timeout.String())
		return nil
	case err != nil && !errors.Is(err, http.ErrServerClosed):
		return err
	}
	log.Info("shutdown: every request finished")
	return nil
}

// listenAdmin opens the admin listener: a Unix socket (mode 0660, so a
// consumer in the same pod group can connect) or a loopback TCP address.
// Anything reachable from outside the host is refused: the admin API spends
// GPU memory.
func listenAdmin(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, err
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(path) // a stale socket from a previous run
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(path, 0o660); err != nil {
			ln.Close()
			return nil, err
		}
		return ln, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("admin-listen %q: want unix:///path or host:port", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("admin-listen %q: must be a Unix socket or a loopback address", addr)
	}
	return net.Listen("tcp", addr)
}
