package main

import (
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/child"
)

// servingRE finds the address in hubproxy's "hubproxy serving" log line.
var servingRE = regexp.MustCompile(`addr=(\S+)`)

// serveProcess is a `hubproxy serve` that startServe started.
type serveProcess struct {
	*child.Process
	addr string // where it serves

	mu    sync.Mutex
	lines []string // its log so far; all of it once Done
}

// log is what the process logged so far, every line once it exited.
func (p *serveProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// startServe runs `hubproxy serve` on a loopback port with args, env added
// to this process's environment, and returns once it logs where it serves.
// It is supervised as every test's child process is (internal/child), and
// killed when the test ends if it still runs.
func startServe(t *testing.T, bin string, env []string, args ...string) *serveProcess {
	t.Helper()
	p := &serveProcess{}
	addr := make(chan string, 1)
	c, err := child.Start(child.Spec{Name: "hubproxy", Path: bin, Args: append([]string{"serve", "--listen", "127.0.0.1:0"}, args...),
		Env: append(os.Environ(), env...),
		OnLine: func(line string) {
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.mu.Unlock()
			if m := servingRE.FindStringSubmatch(line); m != nil && strings.Contains(line, "hubproxy serving") {
				select {
				case addr <- m[1]:
				default: // told already
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	p.Process = c
	t.Cleanup(c.Kill)
	select {
	case p.addr = <-addr:
		return p
	case <-c.Done():
		// Every line came before Done: it exited without serving.
		select {
		case p.addr = <-addr:
			return p
		default:
		}
		t.Fatalf("hubproxy exited (%v) before it served:\n%s", c.Err(), p.log())
	case <-time.After(2 * time.Minute):
		t.Fatalf("hubproxy did not serve within 2 minutes:\n%s", p.log())
	}
	return nil
}
