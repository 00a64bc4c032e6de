// Command hubbench benchmarks hubproxy against nginx (slice + proxy_cache)
// and the upstream itself, on loopback, and writes a Markdown report to
// bench/results/<date>-<host>.md. `make bench` and `make bench-quick` run
// it; bench/README.md explains the scenarios.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hubproxy/hubproxy/bench/harness"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hubbench:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(args []string) error {
	quick := false
	for _, a := range args {
		if a == "-quick" || a == "--quick" || a == "-quick=true" || a == "--quick=true" {
			quick = true
		}
	}
	cfg := harness.Default()
	if quick {
		cfg = harness.Quick()
	}
	fs := flag.NewFlagSet("hubbench", flag.ContinueOnError)
	fs.Bool("quick", quick, "tiny sizes, well under a minute (make bench-quick)")
	fs.StringVar(&cfg.OutDir, "out", cfg.OutDir, "directory for the <date>-<host>.md report")
	fs.StringVar(&cfg.WorkDir, "work-dir", cfg.WorkDir, "parent of the temporary directory for caches and logs (default $TMPDIR)")
	fs.StringVar(&cfg.HubproxyBin, "hubproxy", cfg.HubproxyBin, "hubproxy binary (default: go build ./cmd/hubproxy)")
	fs.IntVar(&cfg.Reps, "reps", cfg.Reps, "repetitions of every measurement")
	bw := fs.String("bandwidth", sizeString(cfg.Bandwidth), "upstream bandwidth cap per connection, per second (0 = none)")
	fs.DurationVar(&cfg.Latency, "latency", cfg.Latency, "latency the upstream adds to every request")
	large := fs.String("large", sizeString(cfg.LargeSize), "size of the large model (scenarios 1-4, 8, 9)")
	tensor := fs.String("tensor", sizeString(cfg.TensorSize), "size of each tensor of the large model")
	herd := fs.String("herd", sizeString(cfg.HerdSize), "size of the file the herd downloads (scenario 5)")
	fs.IntVar(&cfg.HerdClients, "herd-clients", cfg.HerdClients, "concurrent cold clients in scenario 5")
	cluster := fs.String("cluster-size", sizeString(cfg.ClusterSize), "size of the cold file of the cluster scenario (10); the large model itself when equal to -large")
	fs.IntVar(&cfg.ClusterNodes, "cluster-nodes", cfg.ClusterNodes, "hubproxy nodes in scenario 10")
	fs.IntVar(&cfg.ClusterClients, "cluster-clients", cfg.ClusterClients, "clients on each node in scenario 10")
	fs.StringVar(&cfg.MinioBin, "minio", cfg.MinioBin, "MinIO binary for scenario 10's S3 store (default: $HUBPROXY_MINIO, else the one make minio builds into .tools/)")
	fs.IntVar(&cfg.Shards, "shards", cfg.Shards, "shards of the sharded model (scenario 6)")
	fs.IntVar(&cfg.ShardTensors, "shard-tensors", cfg.ShardTensors, "tensors per shard")
	fs.IntVar(&cfg.RangeConns, "range-conns", cfg.RangeConns, "concurrent connections in scenario 3")
	fs.DurationVar(&cfg.RangeDuration, "range-duration", cfg.RangeDuration, "length of each scenario-3, -8 and -9 run")
	fs.IntVar(&cfg.FixedRangeConns, "fixed-range-conns", cfg.FixedRangeConns, "concurrent keep-alive connections in scenarios 8 and 9")
	small := fs.String("small-range", sizeString(cfg.SmallRange), "range size of scenario 8 (warm small ranges)")
	big := fs.String("big-range", sizeString(cfg.BigRange), "range size of scenario 9 (warm large ranges)")
	fs.IntVar(&cfg.Aria2Conns, "aria2c-conns", cfg.Aria2Conns, "aria2c's -x and -s in scenario 1 (at most 16)")
	ariaSplit := fs.String("aria2c-split", sizeString(cfg.Aria2Split), "aria2c's -k (--min-split-size), at least 1MiB")
	fs.BoolVar(&cfg.NoAria2, "no-aria2c", cfg.NoAria2, "leave aria2c out of scenario 1")
	ceiling := fs.String("ceiling-size", sizeString(cfg.CeilingSize), "bytes each machine-ceiling probe writes, hashes and sends")
	slice := fs.String("slice", sizeString(cfg.SliceSize), "nginx slice size")
	fs.StringVar(&cfg.NginxWorkers, "nginx-workers", cfg.NginxWorkers, "nginx worker_processes")
	fs.BoolVar(&cfg.Verify, "verify", cfg.Verify, "check the sha256 of every full download")
	fs.StringVar(&cfg.Only, "only", cfg.Only, "run one scenario alone: s3 (scenario 11, the S3 API against MinIO and the hub routes); default: all")
	s3Range := fs.String("s3-range", sizeString(cfg.S3RangeSize), "ranged GET size of the S3 scenario (11)")
	s3Conns := fs.String("s3-conns", joinInts(cfg.S3Conns), "comma-separated connection counts of the S3 scenario's ranged GETs")
	fs.BoolVar(&cfg.NoInstall, "no-install", cfg.NoInstall, "never apt-get install nginx-light or aria2, nor build MinIO")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, s := range []struct {
		flag string
		v    *string
		dst  *int64
	}{{"bandwidth", bw, &cfg.Bandwidth}, {"large", large, &cfg.LargeSize}, {"tensor", tensor, &cfg.TensorSize},
		{"herd", herd, &cfg.HerdSize}, {"cluster-size", cluster, &cfg.ClusterSize}, {"slice", slice, &cfg.SliceSize}, {"small-range", small, &cfg.SmallRange},
		{"big-range", big, &cfg.BigRange}, {"aria2c-split", ariaSplit, &cfg.Aria2Split}, {"ceiling-size", ceiling, &cfg.CeilingSize}, {"s3-range", s3Range, &cfg.S3RangeSize}} {
		n, err := parseSize(*s.v)
		if err != nil {
			return fmt.Errorf("-%s: %w", s.flag, err)
		}
		*s.dst = n
	}
	conns, err := parseInts(*s3Conns)
	if err != nil {
		return fmt.Errorf("-s3-conns: %w", err)
	}
	cfg.S3Conns = conns
	cfg.Log = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	t0 := time.Now()
	rep, err := harness.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Println(rep.Markdown())
	fmt.Fprintf(os.Stderr, "hubbench: wrote %s in %v\n", rep.Path, time.Since(t0).Round(time.Second))
	return nil
}

// parseSize reads "2GiB", "512MiB", "64KiB" or plain bytes.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", harness.GiB}, {"MiB", harness.MiB}, {"KiB", harness.KiB}, {"G", harness.GiB}, {"M", harness.MiB}, {"K", harness.KiB}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(v), u.n
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("bad size %q (want e.g. 2GiB, 512MiB, 4096)", s)
	}
	return int64(f * float64(mult)), nil
}

// sizeString is the flag default for n bytes.
func sizeString(n int64) string {
	switch {
	case n >= harness.GiB && n%harness.GiB == 0:
		return strconv.FormatInt(n/harness.GiB, 10) + "GiB"
	case n >= harness.MiB && n%harness.MiB == 0:
		return strconv.FormatInt(n/harness.MiB, 10) + "MiB"
	case n >= harness.KiB && n%harness.KiB == 0:
		return strconv.FormatInt(n/harness.KiB, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10)
}

// parseInts reads "8,16".
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q in %q (want e.g. 8,16)", f, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// joinInts is the flag default for ns.
func joinInts(ns []int) string {
	var fs []string
	for _, n := range ns {
		fs = append(fs, strconv.Itoa(n))
	}
	return strings.Join(fs, ",")
}
