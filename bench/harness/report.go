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
	Scenario int    // 1–7, as numbered in the issue
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
// raw figures and the headline lines for the README.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# hubproxy benchmark: %s on %s\n\n", r.Started.Format("2006-01-02"), r.Machine.Host)
	fmt.Fprintf(&b, "Machine: %s.\n\n", r.Machine.String())
	for _, s := range r.Settings {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	fmt.Fprintf(&b, "- run time: %s\n\n", r.Elapsed.Round(time.Second))

	b.WriteString("## Ratios (hubproxy / peer, medians)\n\n")
	b.WriteString("Below 1 means hubproxy's figure is smaller. The name in brackets is who the ratio favours (within 5%: tie).\n\n")
	b.WriteString("| # | Scenario | Metric | Better | hubproxy / nginx-slice | hubproxy / direct |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, m := range r.Measures {
		fmt.Fprintf(&b, "| %d | %s | %s (%s) | %s | %s | %s |\n", m.Scenario, m.Title, m.Metric, m.Unit, m.Better,
			ratioCell(m, Nginx), ratioCell(m, Direct))
	}

	b.WriteString("\n## Raw figures (median (min–max) over the repetitions)\n\n")
	b.WriteString("| # | Scenario | Metric | Unit | hubproxy | nginx-slice | direct | Note |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, m := range r.Measures {
		fmt.Fprintf(&b, "| %d | %s | %s | %s", m.Scenario, m.Title, m.Metric, m.Unit)
		for _, t := range targetNames {
			fmt.Fprintf(&b, " | %s", cell(summarize(m.Samples[t])))
		}
		fmt.Fprintf(&b, " | %s |\n", m.Note)
	}

	b.WriteString("\n## Headline\n\n")
	b.WriteString(r.Headline())
	return b.String()
}

// Headline is the few lines the README quotes: the headline measures'
// ratios, and the machine they came from.
func (r *Report) Headline() string {
	var b strings.Builder
	cmd := "make bench"
	if r.mode() == "quick" {
		cmd = "make bench-quick"
	}
	fmt.Fprintf(&b, "Measured %s on %s (`%s`, %s sizes):\n\n", r.Started.Format("2006-01-02"), r.Machine.String(), cmd, r.mode())
	b.WriteString("| Scenario | Metric | hubproxy | vs nginx-slice | vs direct |\n|---|---|---|---|---|\n")
	for _, m := range r.Measures {
		if !m.Headline {
			continue
		}
		fmt.Fprintf(&b, "| %d. %s | %s | %s %s | %s | %s |\n", m.Scenario, m.Title, m.Metric,
			sig(summarize(m.Samples[Hubproxy]).median), m.Unit, ratioCell(m, Nginx), ratioCell(m, Direct))
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
