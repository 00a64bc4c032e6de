package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
)

// The cluster scenario's tiers, as the report names them.
const (
	// TierS3 is the nodes sharing chunks through MinIO (s3://) on loopback.
	TierS3 = "MinIO store"
	// TierFile is the nodes sharing chunks through a file:// directory, as
	// on a ReadWriteMany volume.
	TierFile = "file:// store"
	// TierNone is the same nodes, each on its own.
	TierNone = "no store"
	// TierPod is one hubproxy that every client of every node goes
	// through: the shared-pod deployment the store replaces.
	TierPod = "one shared pod"
)

// clusterTiers is the report's column order, and each repetition's order.
func clusterTiers() []string { return []string{TierS3, TierFile, TierNone, TierPod} }

// tierKey names a tier's processes and directories.
func tierKey(tier string) string {
	switch tier {
	case TierS3:
		return "s3"
	case TierFile:
		return "file"
	case TierNone:
		return "nostore"
	}
	return "pod"
}

// Cluster is scenario 10's result: its shape and measures sampled by tier
// (Measure.Samples is keyed by the Tier names, not by target).
type Cluster struct {
	Nodes, Clients int
	Size           int64
	Measures       []Measure
}

// clusterSamples are scenario 10's values, by tier.
type clusterSamples struct {
	ups, times, written, read samples
}

// cluster is scenario 10: Nodes hubproxy processes, each with its own empty
// cache and ClusterClients clients, all released at once on one cold file;
// once sharing through MinIO, once through a file:// directory, once each
// node on its own, and once with every client on one shared hubproxy. Every
// repetition starts every process, and the store, empty. A run counts only
// if every node ends up holding the file, verified, in its cache.
func (b *bench) cluster(ctx context.Context) (*Cluster, error) {
	f := b.fx.cluster
	s := clusterSamples{ups: samples{}, times: samples{}, written: samples{}, read: samples{}}
	for rep := 1; rep <= b.cfg.Reps; rep++ {
		for _, tier := range clusterTiers() {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := b.clusterRun(ctx, tier, rep, f, s); err != nil {
				return nil, fmt.Errorf("scenario 10, %s, repetition %d: %w", tier, rep, err)
			}
		}
	}
	n, m := b.cfg.ClusterNodes, b.cfg.ClusterClients
	title := fmt.Sprintf("%d nodes × %d clients, cold %s", n, m, sizeName(f.size))
	return &Cluster{Nodes: n, Clients: m, Size: f.size, Measures: []Measure{
		{Scenario: 10, Title: title, Metric: "upstream bytes / file size", Unit: "x", Better: Lower, Samples: s.ups, Headline: true},
		{Scenario: 10, Title: title, Metric: "time to the last client done", Unit: "s", Better: Lower, Samples: s.times, Headline: true},
		{Scenario: 10, Title: title, Metric: "store bytes written", Unit: "MiB", Better: Lower, Samples: s.written,
			Note: "each chunk is put once, by the node that fetched it"},
		{Scenario: 10, Title: title, Metric: "store bytes read", Unit: "MiB", Better: Lower, Samples: s.read,
			Note: fmt.Sprintf("every other node reads each chunk once: about %d× the file", n-1)},
	}}, nil
}

// benchStoreSecret is the shared-store secret of the bench's nodes.
const benchStoreSecret = "hubproxy-bench-store-secret-0123456789"

// clusterRun is one repetition of one tier: it starts the store and the
// nodes, runs every client at once, checks every node cached the file and
// records the figures; it stops everything it started before returning.
func (b *bench) clusterRun(ctx context.Context, tier string, rep int, f modelFile, s clusterSamples) error {
	var args, env []string
	switch tier {
	case TierS3:
		if err := b.minio.restart(ctx); err != nil {
			return err
		}
		defer b.minio.stop()
		args, env = []string{"--shared-store", b.minio.url(fmt.Sprintf("rep-%d", rep))}, b.minio.nodeEnv()
	case TierFile:
		dir := filepath.Join(b.work, fmt.Sprintf("filestore-%d", rep))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		args = []string{"--shared-store", "file://" + dir}
	}
	if args != nil {
		// The nodes' common secret, which seals the chunks they share.
		args = append(args, "--shared-store-secret", benchStoreSecret)
	}
	n, m := b.cfg.ClusterNodes, b.cfg.ClusterClients
	perNode := m
	if tier == TierPod {
		n, perNode = 1, n*m
	}
	nodes := make([]*server, n)
	clients := make([]*http.Client, n)
	defer func() {
		for i, nd := range nodes {
			if nd != nil {
				nd.stop()
				clients[i].CloseIdleConnections()
			}
		}
	}()
	for i := range nodes {
		label := fmt.Sprintf("cluster-%s-r%d-node%d", tierKey(tier), rep, i)
		nodes[i] = newHubproxyNode(b.procs, b.work, label, b.hubproxyBin, b.hub.URL, args, env)
		clients[i] = newClient(perNode)
		if err := nodes[i].restart(ctx); err != nil {
			return err
		}
	}
	up, d, err := b.upstream(func() error {
		return togetherEach(ctx, n*perNode, func(ctx context.Context, i int) error {
			nd := i / perNode
			return download(ctx, clients[nd], fileURL(nodes[nd].baseURL(), f.repo, f.path), f.size, f.sha256)
		})
	})
	if err != nil {
		return err
	}
	for _, nd := range nodes {
		if _, err := b.cachedBlob(ctx, nd, f); err != nil {
			return err
		}
	}
	ratio := float64(up) / float64(f.size)
	s.ups.add(tier, ratio)
	s.times.add(tier, d.Seconds())
	line := fmt.Sprintf("10 cluster       %-15s %d×%d %7.2f s  upstream %.2fx file", tier, n, perNode, d.Seconds(), ratio)
	if args != nil {
		st, err := storeStats(ctx, nodes)
		if err != nil {
			return err
		}
		s.written.add(tier, st.written/float64(MiB))
		s.read.add(tier, st.read/float64(MiB))
		line += fmt.Sprintf("  store written %.2fx read %.2fx file  claims won %.0f waited %.0f taken over %.0f",
			st.written/float64(f.size), st.read/float64(f.size), st.won, st.waited, st.takenOver)
	}
	b.logf("%s", line)
	return nil
}
