package harness

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Better says which direction of a metric is an improvement.
type Better int

// The directions.
const (
	Lower Better = iota
	Higher
)

func (b Better) String() string {
	if b == Higher {
		return "higher"
	}
	return "lower"
}

// Measure is one metric of one scenario, sampled for each target.
type Measure struct {
	Scenario int    // 1–10, as numbered in bench/README.md
	Title    string // the scenario's short name
	Metric   string
	Unit     string
	Better   Better
	// Samples holds every repetition's value, by target name. A target
	// missing from it has no such figure (direct has no memory of its own).
	Samples map[string][]float64
	// Note qualifies the figures ("direct has no cache: …").
	Note string
	// Headline marks the measures the README quotes.
	Headline bool
}

// Report is a finished run.
type Report struct {
	Started  time.Time
	Elapsed  time.Duration
	Machine  Machine
	Settings []string // "key: value" lines describing the run
	Measures []Measure
	// Ceiling is the machine's own limit for a cold download (nil: not
	// measured).
	Ceiling *Ceiling
	// Cluster is scenario 10, whose columns are tiers, not targets (nil:
	// not run).
	Cluster *Cluster
	// S3 is scenario 11, whose columns are the S3 API and its peers (nil:
	// not run).
	S3 *S3Bench
	// Path is where the Markdown was written ("" until it is).
	Path string
	// Groups lists the process group of every child the run started; all
	// are gone once Run returns.
	Groups []int
}

// sig formats v with about three significant figures.
func sig(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "—"
	case a == 0:
		return "0"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.2f", v)
	case a >= 0.1:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// cell is "median (min–max)" for a sample, "—" for none.
func cell(s summary) string {
	switch {
	case s.n == 0:
		return "—"
	case s.n == 1 || s.min == s.max:
		return sig(s.median)
	}
	return fmt.Sprintf("%s (%s–%s)", sig(s.median), sig(s.min), sig(s.max))
}

// verdict reads a hubproxy / peer ratio: within 5% is a tie.
func verdict(r float64, b Better) string {
	switch {
	case math.IsNaN(r):
		return "—"
	case r > 0.95 && r < 1/0.95:
		return "tie"
	case (r < 1) == (b == Lower):
		return "hubproxy"
	}
	return "peer"
}

// ratioCell is a ratio with who it favours, "0.21 (hubproxy)".
func ratioCell(m Measure, peer string) string {
	r := ratio(summarize(m.Samples[Hubproxy]), summarize(m.Samples[peer]))
	if math.IsNaN(r) {
		return "—"
	}
	return fmt.Sprintf("%s (%s)", sig(r), verdict(r, m.Better))
}

// Markdown renders the report: machine and settings, the ratio table, the
// raw figures, the machine's ceiling and the headline lines for the README.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# hubproxy benchmark: %s on %s\n\n", r.Started.Format("2006-01-02"), r.Machine.Host)
	fmt.Fprintf(&b, "Machine: %s.\n\n", r.Machine.String())
	for _, s := range r.Settings {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	fmt.Fprintf(&b, "- run time: %s\n\n", r.Elapsed.Round(time.Second))

	if len(r.Measures) > 0 {
		r.targetTables(&b)
	}
	if c := r.Cluster; c != nil {
		fmt.Fprintf(&b, "\n## Cluster: %d nodes × %d clients on one cold file (scenario 10; median (min–max))\n\n", c.Nodes, c.Clients)
		b.WriteString(c.markdown())
	}

	if s := r.S3; s != nil {
		fmt.Fprintf(&b, "\n## S3 API: hubproxy against MinIO warm, against its hub routes cold (scenario 11; median (min–max))\n\n")
		b.WriteString(s.markdown())
	}

	if r.Ceiling != nil {
		b.WriteString("\n## The machine's ceiling for a cold download\n\n")
		b.WriteString(r.ceilingMarkdown())
	}

	b.WriteString("\n## Headline\n\n")
	b.WriteString(r.Headline())
	return b.String()
}

// targetTables writes the ratio and raw-figure tables of the scenarios whose
// columns are targets (1–9).
func (r *Report) targetTables(b *strings.Builder) {
	b.WriteString("## Ratios (hubproxy / peer, medians)\n\n")
	b.WriteString("Below 1 means hubproxy's figure is smaller. The name in brackets is who the ratio favours (within 5%: tie). aria2c takes part in scenario 1 only.\n\n")
	b.WriteString("| # | Scenario | Metric | Better |")
	for _, p := range peerNames {
		fmt.Fprintf(b, " hubproxy / %s |", p)
	}
	b.WriteString("\n|---|---|---|---|" + strings.Repeat("---|", len(peerNames)) + "\n")
	for _, m := range r.Measures {
		fmt.Fprintf(b, "| %d | %s | %s (%s) | %s |", m.Scenario, m.Title, m.Metric, m.Unit, m.Better)
		for _, p := range peerNames {
			fmt.Fprintf(b, " %s |", ratioCell(m, p))
		}
		b.WriteString("\n")
	}

	b.WriteString("\n## Raw figures (median (min–max) over the repetitions)\n\n")
	b.WriteString("| # | Scenario | Metric | Unit |")
	for _, t := range targetNames {
		fmt.Fprintf(b, " %s |", t)
	}
	b.WriteString(" Note |\n|---|---|---|---|" + strings.Repeat("---|", len(targetNames)) + "---|\n")
	for _, m := range r.Measures {
		fmt.Fprintf(b, "| %d | %s | %s | %s", m.Scenario, m.Title, m.Metric, m.Unit)
		for _, t := range targetNames {
			fmt.Fprintf(b, " | %s", cell(summarize(m.Samples[t])))
		}
		fmt.Fprintf(b, " | %s |\n", m.Note)
	}
}

// coldThroughput is scenario 1's throughput measure, if the report has it.
func (r *Report) coldThroughput() (Measure, bool) {
	for _, m := range r.Measures {
		if m.Scenario == 1 && m.Metric == "throughput" {
			return m, true
		}
	}
	return Measure{}, false
}

// ceilingMarkdown is the ceiling section: each probe, the formula, and how
// close every target's cold download came.
func (r *Report) ceilingMarkdown() string {
	c := r.Ceiling
	p := c.parts()
	var b strings.Builder
	fmt.Fprintf(&b, "Measured before the scenarios, with nothing else of the benchmark running, %d times each; median (min–max).\n\n", len(c.Disk))
	b.WriteString("| Stage | Probe | MiB/s | CPU (core-s per GiB) |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| disk write | %s sequential 1 MiB writes into the caches' filesystem, one fsync at the end | %s | %s |\n",
		sizeName(c.Bytes), cell(summarize(c.Disk)), cell(summarize(c.DiskCPU)))
	fmt.Fprintf(&b, "| sha256 | %s on one core (Go's crypto/sha256, as hubproxy's verification) | %s | %s |\n",
		sizeName(c.Bytes), cell(summarize(c.SHA)), sig(1024/p.sha))
	fmt.Fprintf(&b, "| loopback TCP | %s from a Go server to a Go client, one connection | %s | %s (both ends) |\n",
		sizeName(c.Bytes), cell(summarize(c.TCP)), cell(summarize(c.TCPCPU)))
	if c.Line > 0 {
		fmt.Fprintf(&b, "| upstream line rate | the fake CDN's cap × %d connections (hubproxy's upstream limit; aria2c's -x) | %s | — |\n", c.LineConns, sig(c.Line))
	}
	fmt.Fprintf(&b, "| CPU budget | %d cores ÷ (2 × loopback CPU + sha256 CPU + disk-write CPU) per byte | %s | — |\n", c.Cores, sig(p.cpu))
	fmt.Fprintf(&b, "| **ceiling** | **the smallest of the above: %s** | **%s** | |\n\n", p.limit, sig(p.ceiling))
	b.WriteString("A cold download through hubproxy moves every byte over loopback twice (CDN → hubproxy, hubproxy → client), " +
		"writes it to the cache once and hashes it once. Each stage alone caps the download at its own rate; " +
		"together they share the machine's cores, so the CPU each byte costs in all stages, spread over every core, caps it too. " +
		"The ceiling is the smallest of these caps: the best a perfectly pipelined proxy could do on this machine. " +
		"It is optimistic: it ignores the fake hub's pacing, the client's own work and the kernel's writeback threads.\n\n")
	if m, ok := r.coldThroughput(); ok {
		b.WriteString("| Target | Cold download (MiB/s) | Share of the ceiling |\n|---|---|---|\n")
		for _, t := range targetNames {
			s := summarize(m.Samples[t])
			if s.n == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f%% |\n", t, sig(s.median), 100*s.median/p.ceiling)
		}
		b.WriteString("\naria2c neither hashes nor serves a second hop, so its own ceiling is higher; the share shows how close the link and the disk let it come.\n")
	}
	return b.String()
}

// ceilingLine is the headline's sentence on the ceiling.
func (r *Report) ceilingLine() string {
	if r.Ceiling == nil {
		return ""
	}
	p := r.Ceiling.parts()
	line := fmt.Sprintf("Ceiling for a cold verified-and-cached download on this machine: %s MiB/s (the smallest of disk write %s, sha256 %s, loopback %s, CPU budget %s",
		sig(p.ceiling), sig(p.disk), sig(p.sha), sig(p.tcp), sig(p.cpu))
	if p.line > 0 {
		line += fmt.Sprintf(", line rate %s", sig(p.line))
	}
	line += "; bench/README.md explains it)"
	if m, ok := r.coldThroughput(); ok {
		if s := summarize(m.Samples[Hubproxy]); s.n > 0 {
			line += fmt.Sprintf("; hubproxy's cold download reached %.0f%% of it", 100*s.median/p.ceiling)
		}
		if s := summarize(m.Samples[Aria2c]); s.n > 0 {
			line += fmt.Sprintf(", aria2c's %.0f%%", 100*s.median/p.ceiling)
		}
	}
	return line + ".\n"
}

// Headline is the few lines the README quotes: the headline measures'
// ratios, the ceiling, and the machine they came from.
func (r *Report) Headline() string {
	var b strings.Builder
	cmd := "make bench"
	if r.mode() == "quick" {
		cmd = "make bench-quick"
	}
	if o := r.only(); o != "" {
		cmd = "bin/hubbench -only " + o
		if r.mode() == "quick" {
			cmd = "bin/hubbench -quick -only " + o
		}
	}
	fmt.Fprintf(&b, "Measured %s on %s (`%s`, %s sizes):\n\n", r.Started.Format("2006-01-02"), r.Machine.String(), cmd, r.mode())
	if len(r.Measures) > 0 {
		b.WriteString("| Scenario | Metric | hubproxy |")
		for _, p := range peerNames {
			fmt.Fprintf(&b, " vs %s |", p)
		}
		b.WriteString("\n|---|---|---|" + strings.Repeat("---|", len(peerNames)) + "\n")
		for _, m := range r.Measures {
			if !m.Headline {
				continue
			}
			fmt.Fprintf(&b, "| %d. %s | %s | %s %s |", m.Scenario, m.Title, m.Metric, sig(summarize(m.Samples[Hubproxy]).median), m.Unit)
			for _, p := range peerNames {
				fmt.Fprintf(&b, " %s |", ratioCell(m, p))
			}
			b.WriteString("\n")
		}
	}
	if r.Cluster != nil {
		b.WriteString("\n" + r.Cluster.headline())
	}
	if r.S3 != nil {
		if l := r.S3.headline(); l != "" {
			if len(r.Measures) > 0 || r.Cluster != nil {
				b.WriteString("\n") // after a table or a line, not after the intro's blank line
			}
			b.WriteString(l)
		}
	}
	if l := r.ceilingLine(); l != "" {
		b.WriteString("\n" + l)
	}
	return b.String()
}

func (r *Report) mode() string {
	for _, s := range r.Settings {
		if v, ok := strings.CutPrefix(s, "mode: "); ok {
			return v
		}
	}
	return "default"
}

// only is the one scenario the run was limited to, "" for all.
func (r *Report) only() string {
	for _, s := range r.Settings {
		if v, ok := strings.CutPrefix(s, "only: scenario "); ok {
			return v
		}
	}
	return ""
}

// Write writes the Markdown to dir/<date>-<host>.md and records the path.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := fmt.Sprintf("%s-%s.md", r.Started.Format("2006-01-02"), safeName(r.Machine.Host))
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	r.Path = path
	return nil
}

// safeName keeps a host name usable as a file name.
func safeName(s string) string {
	s = strings.Map(func(c rune) rune {
		if c == '-' || c == '.' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			return c
		}
		return '_'
	}, s)
	if s == "" {
		return "unknown"
	}
	return s
}
