package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hubproxy/hubproxy/internal/child"
)

// procs tracks the children of a run. Each child leads its own process
// group, so one signal reaches a child's own children too (nginx's workers
// and cache processes), and the harness's terminal signals are not
// delivered to them behind its back.
type procs struct {
	mu      sync.Mutex // guards live and started
	live    map[int]*proc
	started []int // every process group id ever started, for leak checks
}

func newProcs() *procs { return &procs{live: map[int]*proc{}} }

// proc is one running child, supervised by internal/child (its own
// process group, a parent-death signal), with its log.
type proc struct {
	*child.Process
	logPath string
}

// ErrExited is wrapped when a child exits while the harness still needs it.
var ErrExited = errors.New("harness: child process exited")

// start runs bin with args, output to logPath, in a new process group, with
// deathSig as its parent-death signal: what the kernel sends it if the
// harness dies without stopping it (SIGKILL, say). Use SIGKILL for a single
// process; a master with children of its own needs a signal it handles by
// taking them down too (SIGTERM for nginx, whose workers would otherwise
// outlive a killed master).
func (g *procs) start(name, bin string, args, env []string, logPath string, deathSig syscall.Signal) (*proc, error) {
	// O_APPEND, so that a child that also opens the file itself (nginx's
	// error log) does not overwrite what its stderr wrote.
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	c, err := child.Start(child.Spec{Name: name, Path: bin, Args: args, Env: env, Output: logf, DeathSignal: deathSig})
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	return g.adopt(c, logPath), nil
}

// adopt tracks a child started elsewhere (MinIO, by miniotest) as one of
// the run's.
func (g *procs) adopt(c *child.Process, logPath string) *proc {
	p := &proc{Process: c, logPath: logPath}
	g.add(p)
	return p
}

func (g *procs) add(p *proc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.live[p.Pid] = p
	g.started = append(g.started, p.Pid)
}

// stop ends p's whole group: SIGTERM, then SIGKILL after grace. It returns
// once the child is reaped and no process of its group is left running.
func (g *procs) stop(p *proc, grace time.Duration) {
	if p == nil {
		return
	}
	p.Stop(grace)
	for i := 0; i < 100 && len(groupMembers(p.Pid)) > 0; i++ {
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		time.Sleep(10 * time.Millisecond) // waiting on processes that are not our children
	}
	g.mu.Lock()
	delete(g.live, p.Pid)
	g.mu.Unlock()
}

// stopAll stops every live child; it is what every exit path runs.
func (g *procs) stopAll() {
	g.mu.Lock()
	ps := make([]*proc, 0, len(g.live))
	for _, p := range g.live {
		ps = append(ps, p)
	}
	g.mu.Unlock()
	for _, p := range ps {
		g.stop(p, 5*time.Second)
	}
}

// startedGroups returns every process group id started so far.
func (g *procs) startedGroups() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.started...)
}

// procStat is what the harness needs from /proc/<pid>/stat.
type procStat struct {
	pid, pgrp int
	state     byte
	// cpu is utime + stime, the CPU time the process has used so far.
	cpu time.Duration
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 on every architecture Go supports.
const clockTick = 10 * time.Millisecond

// readStat parses /proc/<pid>/stat; comm may hold spaces and parentheses,
// so fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("harness: malformed /proc/%d/stat", pid)
	}
	// After the comm: state (field 3), ppid, pgrp (5), …, utime (14),
	// stime (15).
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("harness: malformed /proc/%d/stat", pid)
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, err
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return procStat{}, fmt.Errorf("harness: /proc/%d/stat: %w", pid, err)
	}
	return procStat{pid: pid, pgrp: pgrp, state: f[0][0], cpu: time.Duration(utime+stime) * clockTick}, nil
}

// groupCPU is the CPU time the live members of group pgid have used so far
// (for nginx: master, workers and cache processes). A member that has
// exited takes its time with it, so take differences over short spans.
func groupCPU(pgid int) (time.Duration, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var total time.Duration
	found := false
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil && st.pgrp == pgid && st.state != 'Z' && st.state != 'X' {
			total += st.cpu
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("%w: group %d has no live process", ErrExited, pgid)
	}
	return total, nil
}

// machineCPU is the CPU time all of the machine's CPUs have spent busy
// since boot (user, nice, system, irq, softirq and steal in /proc/stat's
// first line): everything, the harness, the servers and anything else that
// runs, kernel work included.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system [idle iowait] irq softirq steal
		v, _ := strconv.ParseInt(f[i], 10, 64)
		busy += v
	}
	return time.Duration(busy) * clockTick
}

// selfCPU is the CPU time (user + system, all threads) this process has
// used so far: the harness's clients and the fake hub.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// groupMembers lists the pids of group pgid that are not zombies (a zombie
// has exited; it only waits for a parent that may not be us to reap it).
func groupMembers(pgid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err == nil && st.pgrp == pgid && st.state != 'Z' && st.state != 'X' {
			out = append(out, pid)
		}
	}
	return out
}

// peakRSS sums VmHWM (the peak resident set since the process started) over
// the live members of group pgid, in bytes. For nginx that is the master,
// its workers and its cache processes.
func peakRSS(pgid int) (int64, error) {
	var total int64
	members := groupMembers(pgid)
	if len(members) == 0 {
		return 0, fmt.Errorf("%w: group %d has no live process", ErrExited, pgid)
	}
	for _, pid := range members {
		kb, err := vmHWM(pid)
		if err != nil {
			return 0, err
		}
		total += kb * 1024
	}
	return total, nil
}

// vmHWM reads the VmHWM line of /proc/<pid>/status, in kB.
func vmHWM(pid int) (int64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("harness: no VmHWM for pid %d", pid)
}

// freePort asks the kernel for an unused loopback port. Another process
// could take it before the child binds it; the child then fails to start
// and says so in its log.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls url until it answers at all (any status), p exits, or
// the timeout passes.
func waitReady(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := child.WaitHTTP(ctx, p.Process, url, nil)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, child.ErrExited):
		return fmt.Errorf("%w: %s (%v); log: %s", ErrExited, p.Name, p.Err(), logTail(p.logPath))
	default:
		return fmt.Errorf("harness: %v; log: %s", err, logTail(p.logPath))
	}
}

// logTail is the end of a child's log, for error messages.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// childEnv is the harness's environment without proxy settings, so that
// children talk to each other directly on loopback.
func childEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasSuffix(strings.ToLower(k), "_proxy") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
