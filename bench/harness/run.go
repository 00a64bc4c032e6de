package harness

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
)

// bench is one run's state, shared by the scenarios.
type bench struct {
	cfg     Config
	log     io.Writer
	hub     *hubtest.Hub
	fx      fixtures
	hp, ng  *server
	targets []target // hubproxy, nginx, direct: in targetNames order
	// aria is the aria2c peer of scenario 1; nil when it is left out.
	aria *aria2
	// cold and coldUp hold scenario 1's download times and upstream ratios
	// by target; scenarios 2 and 4 reuse direct's rather than repeat
	// multi-minute downloads that no cache can change.
	cold, coldUp samples
	// coldRSS and herdRSS are the proxies' peak RSS (MiB) in scenarios 1
	// and 5, reported as scenario 7.
	coldRSS, herdRSS samples

	// What the cluster scenario starts its nodes and its store with.
	procs       *procs
	work        string
	hubproxyBin string
	minio       *minio
	// floorBin is bench/cmd/floorsrv, the net/http floor of scenarios 8
	// and 9 (floor.go).
	floorBin string
}

// Run starts the fake hub, hubproxy and nginx, runs every scenario (or
// only cfg.Only's, with what it needs and nothing else), writes
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

	all := cfg.Only == ""
	var nginxBin, ariaBin string
	if all {
		nginxBin, err = EnsureNginx(ctx, !cfg.NoInstall, log)
		if err != nil {
			return nil, err
		}
		rep.Machine.Nginx = nginxVersion(nginxBin)
		if !cfg.NoAria2 {
			ariaBin, err = EnsureAria2c(ctx, !cfg.NoInstall, log)
			switch {
			case err != nil && cfg.Mode == "quick":
				// The smoke run may go without its peer; CI installs it.
				fmt.Fprintf(log, "aria2c left out of scenario 1: %v\n", err)
				ariaBin = ""
			case err != nil:
				return nil, fmt.Errorf("%w (or run with -no-aria2c)", err)
			default:
				rep.Machine.Aria2c = aria2Version(ariaBin)
			}
		}
	}
	minioBin, err := EnsureMinio(ctx, cfg.MinioBin, cfg.ModuleDir, !cfg.NoInstall, log)
	if err != nil {
		return nil, err
	}
	hubproxyBin := cfg.HubproxyBin
	if hubproxyBin == "" {
		fmt.Fprintln(log, "building hubproxy")
		if hubproxyBin, err = buildHubproxy(ctx, cfg.ModuleDir, work); err != nil {
			return nil, err
		}
	}

	var floorBin string
	if all {
		if floorBin, err = buildCmd(ctx, cfg.ModuleDir, work, "floorsrv"); err != nil {
			return nil, err
		}
	}

	hub, err := hubtest.New(hubtest.Options{BandwidthPerConn: cfg.Bandwidth, Latency: cfg.Latency})
	if err != nil {
		return nil, err
	}
	defer hub.Close()
	fmt.Fprintln(log, "generating synthetic models")
	b := &bench{cfg: cfg, log: log, hub: hub, fx: addFixtures(hub, cfg), procs: g, work: work, hubproxyBin: hubproxyBin, floorBin: floorBin,
		minio: &minio{bin: minioBin, procs: g, workDir: work}}
	if !all {
		rep.Settings = b.settings()
		// One scenario: no peers, no ceiling; the report has its section.
		if rep.S3, err = b.s3(ctx); err != nil {
			return nil, err
		}
		return b.finish(rep)
	}
	b.hp = newHubproxy(g, work, hubproxyBin, hub.URL)
	b.ng = newNginx(g, work, nginxBin, hub.URL, cfg.SliceSize, cfg.NginxWorkers)
	b.targets = []target{b.hp, b.ng, &direct{url: hub.URL}}
	if ariaBin != "" {
		b.aria = &aria2{bin: ariaBin, procs: g, workDir: work, hubURL: hub.URL, conns: cfg.Aria2Conns, split: cfg.Aria2Split}
	}
	rep.Settings = b.settings()

	// The ceiling first, while nothing else runs.
	if rep.Ceiling, err = measureCeiling(ctx, work, cfg.CeilingSize, cfg.Reps, b.logf); err != nil {
		return nil, err
	}
	if cfg.Bandwidth > 0 {
		rep.Ceiling.Line = float64(cfg.Bandwidth) * float64(hubproxyUpstreamConns) / float64(MiB)
		rep.Ceiling.LineConns = hubproxyUpstreamConns
	}
	// Scenarios 8 and 9 run while scenario 1's caches are warm, after 3.
	for _, s := range []func(context.Context) ([]Measure, error){
		b.coldDownload, b.warmDownload, b.warmRanges, b.warmSmallRanges, b.warmBigRanges, b.firstTensor, b.herd, b.listing,
	} {
		ms, err := s(ctx)
		if err != nil {
			return nil, err
		}
		rep.Measures = append(rep.Measures, ms...)
	}
	rep.Measures = append(rep.Measures, b.memory()...)
	slices.SortStableFunc(rep.Measures, func(a, b Measure) int { return cmp.Compare(a.Scenario, b.Scenario) })
	// The warm proxies go first: the cluster needs the disk and the CPUs.
	for _, t := range b.targets {
		t.stop()
	}
	// The S3 scenario starts its own hubproxy nodes and MinIO.
	if rep.S3, err = b.s3(ctx); err != nil {
		return nil, err
	}
	if rep.Cluster, err = b.cluster(ctx); err != nil {
		return nil, err
	}
	return b.finish(rep)
}

// finish stamps the run's end on rep and writes it.
func (b *bench) finish(rep *Report) (*Report, error) {
	rep.Elapsed = time.Since(rep.Started)
	rep.Machine.LoadEnd = loadAvg()
	if err := rep.Write(b.cfg.OutDir); err != nil {
		return nil, err
	}
	return rep, nil
}

// settings describes the run for the report.
func (b *bench) settings() []string {
	c := b.cfg
	mib := func(n int64) string { return fmt.Sprintf("%.4g MiB", float64(n)/float64(MiB)) }
	lines := []string{
		"mode: " + c.Mode,
		fmt.Sprintf("upstream: in-process fake hub (hub + CDN on loopback), %s/s per connection, %v added latency per request", mib(c.Bandwidth), c.Latency),
		fmt.Sprintf("large model: %s (%d tensors of %s); herd file: %s, %d clients; sharded model: %d shards, %s in all, %d tensors each",
			mib(b.fx.large.size), len(b.fx.large.tensors), mib(c.TensorSize), mib(b.fx.herd.size), c.HerdClients, c.Shards, mib(b.fx.shardBytes), c.ShardTensors),
		fmt.Sprintf("ranges (3): %d connections for %v, sizes log-uniform %s–%s", c.RangeConns, c.RangeDuration, sizeName(c.RangeMin), sizeName(c.RangeMax)),
		fmt.Sprintf("fixed ranges (8, 9): %s and %s at random offsets, %d keep-alive connections for %v each, the harness's own HTTP/1.1 load generator",
			sizeName(c.SmallRange), sizeName(c.BigRange), c.FixedRangeConns, c.RangeDuration),
		"hubproxy: default settings (64 KiB blocks, 8 MiB chunks, read-ahead 4, 16 upstream requests), unlimited cache, no admin API",
		fmt.Sprintf("nginx: slice %s, proxy_cache + proxy_cache_lock, worker_processes %s, redirects followed by a second server block (bench/README.md)", mib(c.SliceSize), c.NginxWorkers),
		b.ariaSetting(),
		"net-http-floor (8, 9): a Go net/http server (bench/floor) that answers ranges of hubproxy's own warm blob with the response headers hubproxy sent, by one pread below 128 KiB and sendfile above, as hubproxy does, and does nothing else: what any net/http server costs here",
		fmt.Sprintf("ceiling probes: %s written + fsynced into the caches' filesystem, hashed, and sent over one loopback connection", mib(c.CeilingSize)),
		fmt.Sprintf("cluster (10): %d hubproxy nodes × %d clients each, released at once on one cold %s file (%s); nodes share through MinIO %s on loopback (one drive, in the run's temporary directory) or a file:// directory, or do not share; the one shared pod serves all %d clients",
			c.ClusterNodes, c.ClusterClients, mib(b.fx.cluster.size), b.fx.cluster.repo, miniotest.Version, c.ClusterNodes*c.ClusterClients),
		fmt.Sprintf("S3 API (11): hubproxy serve --s3-listen against MinIO %s on loopback (one drive, in the run's temporary directory) holding the same file; ranged GETs of %s at %s connections, %v each; raw unsigned HTTP/1.1 GETs, no SDK",
			miniotest.Version, sizeName(c.S3RangeSize), andList(c.S3Conns), c.RangeDuration),
		fmt.Sprintf("repetitions: %d; every cold measurement restarts the proxy with an empty cache (the cluster: every node and the store)", c.Reps),
	}
	if c.Only == "" {
		return lines
	}
	// A run of one scenario describes only what that scenario uses.
	var out []string
	for _, l := range lines {
		for _, p := range []string{"mode:", "upstream:", "large model:", "hubproxy:", "S3 API (11):", "repetitions:"} {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return append(out, "only: scenario "+c.Only)
}

// hubproxyUpstreamConns is hubproxy's default cap on concurrent upstream
// requests; the ceiling's line rate assumes a client that opens as many.
const hubproxyUpstreamConns = 16

// ariaSetting describes the aria2c peer.
func (b *bench) ariaSetting() string {
	if b.aria == nil {
		return "aria2c: left out (not installed, or -no-aria2c)"
	}
	return fmt.Sprintf("aria2c (scenario 1): resolve at the hub, then `aria2c -x%d -s%d -k%s --file-allocation=none` on the CDN URL into a directory on the caches' filesystem; no hashing",
		b.aria.conns, b.aria.conns, sizeString(b.aria.split))
}

// logf prints a progress line.
func (b *bench) logf(format string, a ...any) {
	fmt.Fprintf(b.log, format+"\n", a...)
}

// buildHubproxy builds ./cmd/hubproxy of the module at dir (or the one the
// working directory is in) into out.
func buildHubproxy(ctx context.Context, dir, out string) (string, error) {
	return buildCmd(ctx, dir, out, "hubproxy")
}

// buildCmd builds ./cmd/NAME of the hubproxy module at dir, or of the bench
// module (dir/bench, a module of its own) when the product has no such
// command, into out/NAME, static.
func buildCmd(ctx context.Context, dir, out, name string) (string, error) {
	dir, err := moduleRoot(ctx, dir)
	if err != nil {
		return "", err
	}
	pkg := "./cmd/" + name
	if _, err := os.Stat(filepath.Join(dir, pkg)); err != nil {
		dir = filepath.Join(dir, "bench")
	}
	bin := filepath.Join(out, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if o, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("harness: go build %s in %s: %v: %s", pkg, dir, err, tail(o))
	}
	return bin, nil
}

// sizeString is n as aria2c and the command line spell it ("8M", "512K").
func sizeString(n int64) string {
	switch {
	case n%GiB == 0:
		return strconv.FormatInt(n/GiB, 10) + "G"
	case n%MiB == 0:
		return strconv.FormatInt(n/MiB, 10) + "M"
	case n%KiB == 0:
		return strconv.FormatInt(n/KiB, 10) + "K"
	}
	return strconv.FormatInt(n, 10)
}

// andList is ns as a sentence says it: "8 and 16", "4, 8 and 16".
func andList(ns []int) string {
	var out string
	for i, n := range ns {
		switch {
		case i == 0:
		case i == len(ns)-1:
			out += " and "
		default:
			out += ", "
		}
		out += strconv.Itoa(n)
	}
	return out
}
