package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"sync"
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
			l, err := loadServe(cmd.Flags())
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
	logConfig(log, l)
	// The admin socket first: another hubproxy's in use there stops this
	// one before it builds anything or takes the hub API's port.
	aln, err := openAdmin(cfg.AdminListen, app.Defaults().AdminListen, log)
	if err != nil {
		return err
	}
	if aln != nil {
		defer aln.Close() // a second Close, after the admin server's, is harmless
	}
	h, err := app.Build(cfg, log)
	if err != nil {
		return secret.Error(err) // it may quote a configured URL
	}
	defer h.Close()
	ln, err := listenMain(cfg, h.Metrics)
	if err != nil {
		return err
	}
	if aln != nil {
		// ConnContext reads each connection's peer credentials, which
		// decide whose GPU leases a caller may see and end.
		adminSrv := &http.Server{Handler: h.Admin, ConnContext: admin.ConnContext,
			ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
		go adminSrv.Serve(aln)
		// Runs before the cache and GPU are closed (defers unwind in
		// reverse): a staging in progress finishes first. Shutdown closes
		// the listener, which removes the socket if it is still ours.
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), max(cfg.ShutdownTimeout, time.Second))
			defer cancel()
			if adminSrv.Shutdown(sctx) != nil {
				// Shutdown only waits: a handler still running (a prefetch
				// streams for as long as a repo takes) would go on filling
				// the cache while it closes. Closing the connections
				// cancels their requests, and the fills with them.
				adminSrv.Close()
			}
		}()
		log.Info("admin API serving", "addr", aln.Addr().String())
	}
	var inflight atomic.Int64 // requests being served, for the shutdown log
	srv := newMainServer(cfg, h.Main, &inflight)
	errc := make(chan error, 2)
	stopS3, err := serveS3(cfg, h.S3, &inflight, errc, log)
	if err != nil {
		ln.Close()
		return err
	}
	// Drained beside the hub API (stopS3 starts its shutdown; the second
	// call waits for it), before the cache closes.
	defer stopS3()
	go func() { errc <- srv.Serve(ln) }()
	log.Info("hubproxy serving", "addr", ln.Addr().String(), "upstream", secret.URL(cfg.Upstream), "cache_dir", cfg.CacheDir, "offline", cfg.Offline,
		"max_connections", cfg.MaxConnections, "request_read_timeout", cfg.RequestReadTimeout.String())
	select {
	case err := <-errc:
		return err
	case err := <-h.Fatal:
		// A sticky GPU fault: the device's context is dead and only a new
		// process gets a new one. Finish what is in flight, then exit
		// non-zero so the supervisor restarts hubproxy.
		log.Error("shutting down for a restart", "err", err)
		go stopS3()
		return errors.Join(err, drain(srv, &inflight, cfg.ShutdownTimeout, log))
	case <-ctx.Done():
	}
	go stopS3()
	return drain(srv, &inflight, cfg.ShutdownTimeout, log)
}

// serveS3 serves the S3 API on s3-listen, when it is set, with the hub
// API's server settings; a Serve error goes to errc. stop shuts it down,
// letting requests in flight finish for up to shutdown-timeout, and
// returns once it is down; it may be called more than once.
func serveS3(cfg app.Config, h http.Handler, inflight *atomic.Int64, errc chan<- error, log *slog.Logger) (stop func(), err error) {
	if cfg.S3Listen == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.S3Listen)
	if err != nil {
		return nil, fmt.Errorf("s3-listen %s: %w", cfg.S3Listen, err)
	}
	srv := newMainServer(cfg, h, inflight)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("s3-listen: %w", err)
		}
	}()
	log.Info("S3 API serving", "addr", ln.Addr().String())
	var once sync.Once
	done := make(chan struct{})
	return func() {
		once.Do(func() {
			timeout := cfg.ShutdownTimeout
			if timeout <= 0 {
				timeout = app.Defaults().ShutdownTimeout
			}
			sctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if srv.Shutdown(sctx) != nil {
				srv.Close() // the drain time is over: cut what still runs
			}
			close(done)
		})
		<-done
	}, nil
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

// openAdmin opens admin-listen's listener; nil, nil when it is off. A value
// that cannot be bound, or a socket another process serves, is an error: a
// node without the admin API its operator configured, or one that silently
// took over another's, is worse than one that does not start. Only the
// default socket (whether left as the default or written out, as the
// example config does) failing to bind is a warning: its directory
// (/run/hubproxy) is often missing outside a container, and the hub API is
// what clients need.
// defaultAddr is app.Defaults' admin-listen.
func openAdmin(addr, defaultAddr string, log *slog.Logger) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := listenAdmin(addr)
	switch {
	case err == nil:
		return ln, nil
	case addr != defaultAddr || errors.Is(err, errAdminInUse):
		return nil, err
	}
	log.Warn("admin API disabled", "admin_listen", addr, "err", err,
		"fix", `the default admin-listen could not be bound: set --admin-listen to a socket path this user may create, or "" to turn it off`)
	return nil, nil
}
