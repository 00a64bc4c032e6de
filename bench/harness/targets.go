package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Target names, as they appear in the report.
const (
	Hubproxy = "hubproxy"
	Nginx    = "nginx-slice"
	Direct   = "direct"
	// Aria2c is a download client, not a cache: `aria2c -x16 -s16` straight
	// from the CDN URL that resolving the file gives. It takes part in
	// scenario 1 only.
	Aria2c = "aria2c"
)

// targetNames is the report's column order.
var targetNames = []string{Hubproxy, Nginx, Direct, Aria2c, Floor}

// peerNames are the columns hubproxy is divided by.
var peerNames = targetNames[1:]

// target is one thing clients download through.
type target interface {
	// name is one of the target names.
	name() string
	// restart stops the target if it runs and starts it again with an empty
	// cache, so the next request is cold.
	restart(ctx context.Context) error
	// baseURL is what clients use as HF_ENDPOINT.
	baseURL() string
	// peakRSS is the peak resident memory since the last restart, and false
	// for a target with no process of its own.
	peakRSS() (int64, bool, error)
	// cpuTime is the CPU time the target's own processes have used so far
	// (since the last restart), and false for a target with none.
	cpuTime() (time.Duration, bool, error)
	// stop ends the target's processes, if any.
	stop()
}

// direct is the upstream itself: the fake hub, with no cache.
type direct struct{ url string }

func (d *direct) name() string                  { return Direct }
func (d *direct) restart(context.Context) error { return nil }
func (d *direct) baseURL() string               { return d.url }
func (d *direct) peakRSS() (int64, bool, error) { return 0, false, nil }
func (d *direct) cpuTime() (time.Duration, bool, error) {
	return 0, false, nil
}
func (d *direct) stop() {}

// server is a proxy child process that is restarted with a fresh cache
// directory for every cold measurement.
type server struct {
	label   string
	procs   *procs
	workDir string
	// launch starts the process in dir and returns it with its base URL.
	launch func(dir string) (*proc, string, error)

	// Set by restart; used from the run's goroutine only.
	n   int // restarts so far, naming each instance's directory
	p   *proc
	url string
	dir string
}

func (s *server) name() string    { return s.label }
func (s *server) baseURL() string { return s.url }

func (s *server) restart(ctx context.Context) error {
	s.stop()
	s.n++
	s.dir = filepath.Join(s.workDir, fmt.Sprintf("%s-%d", s.label, s.n))
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	p, url, err := s.launch(s.dir)
	if err != nil {
		return err
	}
	s.p, s.url = p, url
	return waitReady(ctx, p, url+"/", 30*time.Second)
}

func (s *server) peakRSS() (int64, bool, error) {
	if s.p == nil {
		return 0, true, fmt.Errorf("%w: %s is not running", ErrExited, s.label)
	}
	n, err := peakRSS(s.p.Pid)
	return n, true, err
}

func (s *server) cpuTime() (time.Duration, bool, error) {
	if s.p == nil {
		return 0, true, fmt.Errorf("%w: %s is not running", ErrExited, s.label)
	}
	d, err := groupCPU(s.p.Pid)
	return d, true, err
}

// cacheDir is where the running instance keeps its cache.
func (s *server) cacheDir() string { return filepath.Join(s.dir, "cache") }

// stop ends the process and removes its cache, which can be gigabytes.
func (s *server) stop() {
	if s.p == nil {
		return
	}
	s.procs.stop(s.p, 5*time.Second)
	s.p = nil
	_ = os.RemoveAll(s.dir)
}

// newHubproxy runs `hubproxy serve` against upstream with an unlimited
// cache and otherwise default settings.
func newHubproxy(g *procs, workDir, bin, upstream string) *server {
	return newHubproxyNode(g, workDir, Hubproxy, bin, upstream, nil, nil)
}

// newHubproxyNode is newHubproxy under its own label (naming its directory
// and log), with more flags and environment: one node of a cluster.
func newHubproxyNode(g *procs, workDir, label, bin, upstream string, extraArgs, extraEnv []string) *server {
	return &server{label: label, procs: g, workDir: workDir, launch: func(dir string) (*proc, string, error) {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		// No admin API: the benchmark does not use it, and its default
		// socket (/run/hubproxy/admin.sock) is one per machine, which a
		// second instance, or a hubproxy the machine really runs, would
		// have taken over.
		args := append([]string{"serve", "--listen", addr, "--upstream", upstream,
			"--cache-dir", filepath.Join(dir, "cache"), "--cache-max-bytes", "0",
			"--cache-min-free-bytes", "0", "--log-level", "warn", "--admin-listen", ""}, extraArgs...)
		env := append(hubproxyEnv(), extraEnv...)
		p, err := g.start(label, bin, args, env, dir+".log", syscall.SIGKILL)
		return p, "http://" + addr, err
	}}
}

// hubproxyEnv is childEnv without HUBPROXY_* settings (a config file, a
// shared store, a token the shell exports), so every instance runs with
// the flags the harness gives it and nothing else.
func hubproxyEnv() []string {
	var out []string
	for _, kv := range childEnv() {
		if !strings.HasPrefix(kv, "HUBPROXY_") {
			out = append(out, kv)
		}
	}
	return out
}

// newNginx runs nginx in the foreground with its own prefix, configuration
// and cache under the instance's directory.
func newNginx(g *procs, workDir, bin, hubURL string, slice int64, workers string) *server {
	return &server{label: Nginx, procs: g, workDir: workDir, launch: func(dir string) (*proc, string, error) {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		inner, err := freePort()
		if err != nil {
			return nil, "", err
		}
		params := nginxParams{
			Prefix: dir, Port: port, InnerPort: inner,
			HubAddr:    strings.TrimPrefix(hubURL, "http://"),
			SliceBytes: slice, Workers: workers, ErrorLog: dir + ".log",
		}
		if os.Geteuid() == 0 {
			params.User = "root"
		}
		conf, err := writeNginxPrefix(params)
		if err != nil {
			return nil, "", err
		}
		// The error log lives beside the instance's directory, which stop
		// removes, so that it outlives the instance for diagnosis.
		args := []string{"-p", dir, "-e", params.ErrorLog, "-c", conf}
		p, err := g.start(Nginx, bin, args, childEnv(), dir+".log", syscall.SIGTERM)
		return p, "http://127.0.0.1:" + strconv.Itoa(port), err
	}}
}
