// Command clustersim prints what the shared tier's claim protocol costs for
// clusters larger than this machine can run (bench/clustersim): for each
// cluster size and chunk size, N nodes starting the same model at once
// against S3's published limits and a hub that caps each connection.
//
//	go -C bench run ./cmd/clustersim [-model 140e9] [-files 30] [-nodes 64,256,1000] [-chunks 8,16,64]
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hubproxy/hubproxy/bench/clustersim"
)

func main() {
	var (
		model    = flag.Float64("model", 140e9, "model size, bytes")
		files    = flag.Int("files", 30, "files the model is in")
		nodes    = flag.String("nodes", "64,256,1000", "cluster sizes")
		chunks   = flag.String("chunks", "8,16,64", "chunk sizes, MiB")
		conns    = flag.Int("conns", 16, "concurrent fills per node (upstream-parallelism)")
		hubRate  = flag.Float64("hub-conn-mbps", 50, "the hub's cap per connection, MiB/s")
		hubLat   = flag.Duration("hub-latency", 50*time.Millisecond, "the hub's first-byte latency")
		stRate   = flag.Float64("store-conn-mbps", 85, "a store connection's throughput, MiB/s (S3: 85-90 MB/s)")
		stLat    = flag.Duration("store-latency", 30*time.Millisecond, "the store's first-byte latency")
		getRate  = flag.Float64("get-rate", 5500, "GET/HEAD per second per prefix (S3: 5,500)")
		putRate  = flag.Float64("put-rate", 3500, "PUT/DELETE per second per prefix (S3: 3,500)")
		nodeRate = flag.Float64("node-gbps", 25, "a node's network, Gbit/s")
		fallback = flag.Duration("fallback-after", 3*time.Second, "sharedfill's FallbackAfter (0: readers never fall back)")
		shards   = flag.Int("shards", 256, "key prefixes chunks spread over (hubproxy's layout v4: 256; 0: one per file, as layout v3)")
	)
	flag.Parse()
	ns, err := ints(*nodes)
	check(err)
	cs, err := ints(*chunks)
	check(err)
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "nodes\tchunk MiB\tlast node\tfirst node\tupstream/model\tstore reads/model\tGETs\tpeak GET/s/prefix\tpeak PUT/s/prefix\trequest wait (s)\tfallbacks\tbound\t\n")
	for _, n := range ns {
		for _, c := range cs {
			p := clustersim.Params{Nodes: n, Files: *files, ChunkSize: int64(c) << 20, Conns: *conns,
				FileSize: int64(*model) / int64(*files), HubConnRate: *hubRate * (1 << 20), HubLatency: *hubLat,
				StoreConnRate: *stRate * (1 << 20), StoreLatency: *stLat, GETRate: *getRate, PUTRate: *putRate,
				NodeRate: *nodeRate * 1e9 / 8, Shards: *shards, FallbackAfter: *fallback}
			r, err := clustersim.Run(p)
			check(err)
			m := float64(p.Model())
			fmt.Fprintf(tw, "%d\t%d\t%.0fs\t%.0fs\t%.3f\t%.1f\t%d\t%d\t%d\t%.0f\t%d\t%s\t\n", n, c, r.LastNode.Seconds(), r.FirstNode.Seconds(),
				float64(r.UpstreamBytes)/m, float64(r.StoreReadBytes)/m, r.GETs, r.PeakGETs, r.PeakPUTs, r.Throttled.Seconds(), r.LongWaits, r.Bound)
		}
	}
	tw.Flush()
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "clustersim:", err)
		os.Exit(2)
	}
}
