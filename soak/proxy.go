package soak

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hubproxy/hubproxy/internal/child"
)

// proxyArgs are hubproxy's flags in the soak: a budget far below the
// working set (eviction all the time), small blocks and chunks (many
// upstream requests, so many faults), short decision windows (the oracle's
// windows follow them) and the proxy's own token, approved on every repo
// upstream, which must never open one to a caller.
func proxyArgs(cacheDir, upstream, adminListen, store string) []string {
	args := []string{"serve",
		"--listen", "127.0.0.1:0",
		"--admin-listen", adminListen,
		"--pprof", // procstats counts goroutines from /debug/pprof/goroutine
		"--upstream", upstream,
		"--upstream-token", tokProxy,
		"--cache-dir", cacheDir,
		"--cache-max-bytes", "6MiB",
		"--cache-min-free-bytes", "2MiB",
		"--block-size", "64KiB",
		"--chunk-size", fmt.Sprint(chunkSize),
		"--read-ahead", "2",
		"--upstream-parallelism", "8",
		"--revision-ttl", revisionTTL.String(),
		"--access-ttl", accessTTL.String(),
		// Trust in "this repo is public" while upstream is down lasts no
		// longer than any other decision, so every answer falls in the
		// oracle's one window.
		"--public-ttl", accessTTL.String(),
		"--url-ttl", "2m",
		"--metadata-timeout", "4s",
		"--fill-timeout", "20s",
		"--stall-timeout", "2s",
		"--shutdown-timeout", "5s",
		"--log-format", "json",
		"--log-level", "debug",
	}
	if store != "" {
		// A short lease, so a killed node's claims are taken over within
		// the run and the takeover path runs under every other fault.
		args = append(args, "--shared-store", store, "--shared-store-lease", storeLease.String())
	}
	return args
}

// storeLease is the proxies' shared-store-lease: renewed every third of it,
// long enough that a renewal delayed on a loaded machine is rarely taken
// for a dead node (when it is, both fetch, and the takeover is logged).
const storeLease = 4 * time.Second

// chunkSize is the largest upstream range request a proxy makes.
const chunkSize = 256 << 10

// proxy is one hubproxy, across its incarnations (a kill and restart makes
// a new one on the same cache).
type proxy struct {
	name   string
	crashy bool
	bin    string
	mount  string // its tmpfs ("" without)
	dir    string // its cache directory
	args   []string
	env    []string // on top of the driver's, cleaned
	sink   *logSink
	ledger *ledger
	up     *upstream
	// exited is told of an exit the driver did not cause.
	exited func(p *proxy, inc *incarnation)

	chaosMu sync.Mutex // one kill at a time
	diskMu  sync.Mutex // one disk fill at a time

	mu     sync.Mutex // guards the fields below
	cur    *incarnation
	incs   int
	killed []int // pids of incarnations killed with SIGKILL
	figs   storeFigures
}

// incarnation is one process.
type incarnation struct {
	n           int
	pid         int
	addr, admin string // set before start returns
	started     time.Time
	proc        *child.Process
	done        <-chan struct{} // closed once reaped
	stopping    atomic.Bool     // the driver killed or stopped it
}

// exitErr is how the incarnation exited (Wait's error); it waits for that.
func (inc *incarnation) exitErr() error { return inc.proc.Err() }

// start runs a new incarnation and waits until it serves. It runs
// supervised as the tests' processes are (internal/child): its own process
// group, and a parent-death signal, so a driver that dies takes its
// proxies with it.
func (p *proxy) start() (*incarnation, error) {
	p.mu.Lock()
	p.incs++
	inc := &incarnation{n: p.incs, started: time.Now()}
	p.mu.Unlock()
	ready := make(chan error, 1)
	header := make(chan struct{}) // the sink's header line goes before the process's own
	signalled := false            // only OnLine reads and writes it, one line at a time
	proc, err := child.Start(child.Spec{Name: p.name, Path: p.bin, Args: p.args, Env: append(cleanEnv(), p.env...),
		OnLine: func(line string) {
			<-header
			e := p.sink.line(line)
			switch e.Msg {
			case "hubproxy serving":
				inc.addr = e.Addr
			case "admin API serving":
				inc.admin = e.Addr
			case "admin API disabled":
				if !signalled {
					ready <- fmt.Errorf("soak: %s: admin API disabled: %s", p.name, e.Err)
					signalled = true
				}
			}
			if !signalled && inc.addr != "" && inc.admin != "" {
				ready <- nil
				signalled = true
			}
		}})
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	inc.proc, inc.pid, inc.done = proc, proc.Pid, proc.Done()
	p.sink.write(fmt.Sprintf("--- %s incarnation %d, pid %d, %s", p.name, inc.n, inc.pid, time.Now().Format(clock)))
	close(header)
	select {
	case err = <-ready:
	case <-proc.Done():
		// Every line was handed to OnLine before Done: had it served,
		// ready would hold its verdict.
		select {
		case err = <-ready:
		default:
			err = fmt.Errorf("soak: %s exited before serving: %v", p.name, proc.Err())
		}
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("soak: %s did not start serving within 30s", p.name)
	}
	if err != nil {
		inc.stopping.Store(true)
		proc.Kill()
		return nil, err
	}
	p.mu.Lock()
	p.cur = inc
	p.mu.Unlock()
	go func() {
		<-inc.done
		if !inc.stopping.Load() && p.exited != nil {
			p.exited(p, inc)
		}
	}()
	return inc, nil
}

// cleanEnv is the driver's environment without anything that would
// configure hubproxy, a hub client or an S3 client behind the flags' back.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HUBPROXY_") || strings.HasPrefix(kv, "HF_") || strings.HasPrefix(kv, "AWS_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// started reports whether the proxy ever ran.
func (p *proxy) started() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.incs > 0
}

// address returns where the current incarnation listens ("" while down)
// and which incarnation that is (0 while down).
func (p *proxy) address() (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return "", 0
	}
	return p.cur.addr, p.cur.n
}

func (p *proxy) current() *incarnation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// kill sends SIGKILL to the current incarnation and reaps it.
func (p *proxy) kill() *incarnation {
	p.mu.Lock()
	inc := p.cur
	p.cur = nil
	p.mu.Unlock()
	if inc == nil {
		return nil
	}
	inc.stopping.Store(true)
	inc.proc.Kill()
	p.sink.storeEnded(time.Now())
	p.mu.Lock()
	p.killed = append(p.killed, inc.pid)
	p.mu.Unlock()
	p.sink.write(fmt.Sprintf("--- %s incarnation %d killed (SIGKILL), %s", p.name, inc.n, time.Now().Format(clock)))
	return inc
}

// stop ends the current incarnation with SIGTERM, as an orchestrator
// would, and reports an exit that was not clean.
func (p *proxy) stop() error {
	p.mu.Lock()
	inc := p.cur
	p.cur = nil
	p.mu.Unlock()
	if inc == nil {
		return nil
	}
	inc.stopping.Store(true)
	inTime := inc.proc.Stop(20 * time.Second)
	p.sink.storeEnded(time.Now())
	if !inTime {
		return fmt.Errorf("soak: %s did not exit within 20s of SIGTERM", p.name)
	}
	err := inc.exitErr()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("soak: %s exited with %v after SIGTERM", p.name, err)
	}
	return err
}

// procSet is the proxies.
type procSet struct {
	all []*proxy
}

// pick draws a serving proxy for a client: a crashy one that is down
// right now is skipped for the steady one, which is up unless it failed
// (then the client's request fails too, and the failure is reported).
func (s *procSet) pick(rng *rand.Rand) *proxy {
	p := s.all[rng.IntN(len(s.all))]
	if addr, _ := p.address(); addr != "" {
		return p
	}
	return s.all[0]
}
