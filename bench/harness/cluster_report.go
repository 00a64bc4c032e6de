package harness

import (
	"fmt"
	"math"
	"strings"
)

// clusterRatios are the cluster table's ratio columns: each store tier
// against the same nodes without a store, and against the one shared pod.
func clusterRatios() [][2]string {
	return [][2]string{{TierS3, TierNone}, {TierFile, TierNone}, {TierS3, TierPod}, {TierFile, TierPod}}
}

// clusterRatioCell is num's median over den's, with the tier it favours
// (within 5%: tie), or "—" when either has no figure.
func clusterRatioCell(m Measure, num, den string) string {
	r := ratio(summarize(m.Samples[num]), summarize(m.Samples[den]))
	switch verdict(r, m.Better) {
	case "—":
		return "—"
	case "hubproxy":
		return fmt.Sprintf("%s (%s)", sig(r), num)
	case "peer":
		return fmt.Sprintf("%s (%s)", sig(r), den)
	}
	return sig(r) + " (tie)"
}

// median is tier's median of m, NaN for none.
func median(m Measure, tier string) float64 {
	s := summarize(m.Samples[tier])
	if s.n == 0 {
		return math.NaN()
	}
	return s.median
}

// markdown is the cluster section: what runs, the raw figures by tier, and
// the store tiers' ratios to the other two.
func (c *Cluster) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d hubproxy nodes, each a process with its own empty cache, and %d clients on each (%d in all), released together; "+
		"every client downloads the whole cold %s file from its node. The time is until the last client has it all. "+
		"Upstream bytes are the file bytes the fake hub and its CDN sent, over the file's size; store bytes are the nodes' "+
		"`hubproxy_store_bytes_total`, summed. With a store, one node fetches each chunk upstream and puts it, and the others read it "+
		"from the store: about 1× the file upstream and written, %d× read. Without one, every node fetches the file: %d×. "+
		"The one shared pod is one hubproxy that all %d clients go through: 1× upstream, but on loopback nothing caps what it sends, "+
		"where in a cluster its one network card and disk carry %d copies of the file. Every node must end up holding the file, verified, "+
		"in its cache, or the run fails. The fake hub caps each connection, not the cluster's total, so the no-store tier's %d× upstream "+
		"costs bytes here but not the time a shared egress link would add; and the nodes, the store and the clients share this machine's CPUs, "+
		"so the store's extra hop shows in the time. Upstream bytes carry over to a real cluster; times are this machine's.\n\n",
		c.Nodes, c.Clients, c.Nodes*c.Clients, sizeName(c.Size), c.Nodes-1, c.Nodes, c.Nodes*c.Clients, c.Nodes*c.Clients, c.Nodes)
	tiers := clusterTiers()
	b.WriteString("| Metric | Unit |")
	for _, t := range tiers {
		fmt.Fprintf(&b, " %s |", t)
	}
	b.WriteString(" Note |\n|---|---|" + strings.Repeat("---|", len(tiers)) + "---|\n")
	for _, m := range c.Measures {
		fmt.Fprintf(&b, "| %s | %s", m.Metric, m.Unit)
		for _, t := range tiers {
			fmt.Fprintf(&b, " | %s", cell(summarize(m.Samples[t])))
		}
		note := m.Note
		if m.Unit == "MiB" {
			var per []string
			for _, t := range tiers {
				if v := median(m, t); !math.IsNaN(v) {
					per = append(per, fmt.Sprintf("%s %s×", t, sig(v*float64(MiB)/float64(c.Size))))
				}
			}
			if len(per) > 0 {
				note = strings.TrimPrefix(note+"; over the file: "+strings.Join(per, ", "), "; ")
			}
		}
		fmt.Fprintf(&b, " | %s |\n", note)
	}

	b.WriteString("\nRatios of medians: below 1 means the store tier's figure is smaller; the name in brackets is the tier it favours (within 5%: tie).\n\n")
	b.WriteString("| Metric | Better |")
	for _, r := range clusterRatios() {
		fmt.Fprintf(&b, " %s / %s |", r[0], r[1])
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(clusterRatios())) + "\n")
	for _, m := range c.Measures {
		if len(m.Samples[TierNone]) == 0 {
			continue // store traffic: the other tiers have none to divide by
		}
		fmt.Fprintf(&b, "| %s (%s) | %s |", m.Metric, m.Unit, m.Better)
		for _, r := range clusterRatios() {
			fmt.Fprintf(&b, " %s |", clusterRatioCell(m, r[0], r[1]))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// headline is the cluster's sentence for the headline section.
func (c *Cluster) headline() string {
	var up, times Measure
	for _, m := range c.Measures {
		switch m.Metric {
		case "upstream bytes / file size":
			up = m
		case "time to the last client done":
			times = m
		}
	}
	x := func(v float64) string { return sig(v) + "×" }
	return fmt.Sprintf("Cluster, %d nodes × %d clients on a cold %s file: upstream %s the file with a MinIO store, %s with a file:// store, "+
		"%s without a store, %s through one shared pod; the last client was done in %s s with MinIO (%s the no-store time, %s the one-pod time) "+
		"and %s s with file:// (%s, %s).\n",
		c.Nodes, c.Clients, sizeName(c.Size),
		x(median(up, TierS3)), x(median(up, TierFile)), x(median(up, TierNone)), x(median(up, TierPod)),
		sig(median(times, TierS3)), x(median(times, TierS3)/median(times, TierNone)), x(median(times, TierS3)/median(times, TierPod)),
		sig(median(times, TierFile)), x(median(times, TierFile)/median(times, TierNone)), x(median(times, TierFile)/median(times, TierPod)))
}
