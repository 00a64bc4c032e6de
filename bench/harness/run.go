package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// bench is one run's state, shared by the scenarios.
type bench struct {
	cfg     Config
	log     io.Writer
	hub     *hubtest.Hub
	fx      fixtures
	hp, ng  target
	targets []target // in targetNames order
	// cold and coldUp hold scenario 1's download times and upstream ratios
	// by target; scenarios 2 and 4 reuse direct's rather than repeat
	// multi-minute downloads that no cache can change.
	cold, coldUp samples
	// coldRSS and herdRSS are the proxies' peak RSS (MiB) in scenarios 1
	// and 5, reported as scenario 7.
	coldRSS, herdRSS samples
}

// Run starts the fake hub, hubproxy and nginx, runs every scenario, writes
// the report into cfg.OutDir and stops everything it started, whether it
// returns normally, with an error, on ctx's cancellation or by panicking.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	rep := &Report{Started: time.Now(), Machine: probeMachine()}
	work, err := os.MkdirTemp(cfg.WorkDir, "hubbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	g := newProcs()
	// Deferred calls also run while a panic unwinds this goroutine.
	defer func() {
		g.stopAll()
		rep.Groups = g.startedGroups()
	}()

	nginxBin, err := EnsureNginx(ctx, !cfg.NoInstall, log)
	if err != nil {
		return nil, err
	}
	rep.Machine.Nginx = nginxVersion(nginxBin)
	hubproxyBin := cfg.HubproxyBin
	if hubproxyBin == "" {
		fmt.Fprintln(log, "building hubproxy")
		if hubproxyBin, err = buildHubproxy(ctx, cfg.ModuleDir, work); err != nil {
			return nil, err
		}
	}

	hub, err := hubtest.New(hubtest.Options{BandwidthPerConn: cfg.Bandwidth, Latency: cfg.Latency})
	if err != nil {
		return nil, err
	}
	defer hub.Close()
	fmt.Fprintln(log, "generating synthetic models")
	b := &bench{cfg: cfg, log: log, hub: hub, fx: addFixtures(hub, cfg)}
	b.hp = newHubproxy(g, work, hubproxyBin, hub.URL)
	b.ng = newNginx(g, work, nginxBin, hub.URL, cfg.SliceSize, cfg.NginxWorkers)
	b.targets = []target{b.hp, b.ng, &direct{url: hub.URL}}
	rep.Settings = b.settings()

	for _, s := range []func(context.Context) ([]Measure, error){
		b.coldDownload, b.warmDownload, b.warmRanges, b.firstTensor, b.herd, b.listing,
	} {
		ms, err := s(ctx)
		if err != nil {
			return nil, err
		}
		rep.Measures = append(rep.Measures, ms...)
	}
	rep.Measures = append(rep.Measures, b.memory()...)
	for _, t := range b.targets {
		t.stop()
	}
	rep.Elapsed = time.Since(rep.Started)
	rep.Machine.LoadEnd = loadAvg()
	if err := rep.Write(cfg.OutDir); err != nil {
		return nil, err
	}
	return rep, nil
}

// settings describes the run for the report.
func (b *bench) settings() []string {
	c := b.cfg
	mib := func(n int64) string { return fmt.Sprintf("%.4g MiB", float64(n)/float64(MiB)) }
	return []string{
		"mode: " + c.Mode,
		fmt.Sprintf("upstream: in-process fake hub (hub + CDN on loopback), %s/s per connection, %v added latency per request", mib(c.Bandwidth), c.Latency),
		fmt.Sprintf("large model: %s (%d tensors of %s); herd file: %s, %d clients; sharded model: %d shards, %s in all, %d tensors each",
			mib(b.fx.large.size), len(b.fx.large.tensors), mib(c.TensorSize), mib(b.fx.herd.size), c.HerdClients, c.Shards, mib(b.fx.shardBytes), c.ShardTensors),
		fmt.Sprintf("ranges: %d connections for %v, sizes log-uniform %s–%s", c.RangeConns, c.RangeDuration, sizeName(c.RangeMin), sizeName(c.RangeMax)),
		"hubproxy: default settings (64 KiB blocks, 8 MiB chunks, read-ahead 4, 16 upstream requests), unlimited cache",
		fmt.Sprintf("nginx: slice %s, proxy_cache + proxy_cache_lock, worker_processes %s, redirects followed by a second server block (bench/README.md)", mib(c.SliceSize), c.NginxWorkers),
		fmt.Sprintf("repetitions: %d; every cold measurement restarts the proxy with an empty cache", c.Reps),
	}
}

// logf prints a progress line.
func (b *bench) logf(format string, a ...any) {
	fmt.Fprintf(b.log, format+"\n", a...)
}

// buildHubproxy builds ./cmd/hubproxy of the module at dir (or the one the
// working directory is in) into out.
func buildHubproxy(ctx context.Context, dir, out string) (string, error) {
	if dir == "" {
		o, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
		gomod := strings.TrimSpace(string(o))
		if err != nil || gomod == "" || gomod == os.DevNull {
			return "", fmt.Errorf("harness: cannot find the hubproxy module from the working directory (go env GOMOD: %v)", err)
		}
		dir = filepath.Dir(gomod)
	}
	bin := filepath.Join(out, "hubproxy")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/hubproxy")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if o, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("harness: go build ./cmd/hubproxy: %v: %s", err, tail(o))
	}
	return bin, nil
}
