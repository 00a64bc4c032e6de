package harness

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where a run happened, so its figures can be compared.
type Machine struct {
	Host     string
	CPUs     int    // logical CPUs the harness may use
	CPUModel string // /proc/cpuinfo "model name"
	MemBytes int64  // MemTotal
	Kernel   string
	Go       string
	Nginx    string
	Aria2c   string // "" when aria2c is left out
	// LoadStart and LoadEnd are the 1/5/15-minute load averages when the
	// run began and ended: other work on the machine skews the figures.
	LoadStart, LoadEnd string
}

// probeMachine reads what Linux tells about this machine; fields it cannot
// read stay "unknown".
func probeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), CPUModel: "unknown", Kernel: "unknown", Go: runtime.Version(), LoadStart: loadAvg()}
	if h, err := os.Hostname(); err == nil {
		m.Host = h
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				m.MemBytes = kb * 1024
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// String is the one-line description the report and README use.
func (m Machine) String() string {
	peers := ""
	if m.Nginx != "" { // a run of the S3 scenario alone starts no nginx
		peers = ", nginx " + m.Nginx
	}
	if m.Aria2c != "" {
		peers += ", aria2c " + m.Aria2c
	}
	return fmt.Sprintf("%s, %d CPUs (%s), %.1f GiB RAM, Linux %s, %s%s; load average %s at start, %s at end",
		m.Host, m.CPUs, m.CPUModel, float64(m.MemBytes)/float64(GiB), m.Kernel, m.Go, peers, m.LoadStart, m.LoadEnd)
}
