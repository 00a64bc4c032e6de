// Package child supervises child processes: the one way hubproxy's tools
// (soak, bench) and its tests that run real binaries (hubproxy, MinIO)
// start a process, tell when it is ready, and end it.
//
// Each child leads its own process group, so one signal reaches what it
// starts in turn (nginx's workers), and the parent's terminal signals are
// not delivered to it behind the parent's back. On Linux it also gets a
// parent-death signal, so a driver or test binary that dies takes its
// children with it instead of leaving them holding ports and disks. That
// signal fires when the thread that forked the child ends, not the
// process, and Go may end threads: so the child is started and reaped on
// one goroutine locked to its thread, which lives exactly as long as the
// child.
package child

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Spec says what to run.
type Spec struct {
	Name string   // for errors
	Path string   // the binary
	Args []string // its arguments, without the name
	Env  []string // nil: the parent's environment
	Dir  string   // "": the parent's working directory
	// Output receives the child's stdout and stderr; nil discards them.
	Output io.Writer
	// OnLine, when set, is given each line of that output too, without
	// its newline: every line, the last one included, before Done.
	OnLine func(line string)
	// DeathSignal is what the kernel sends the child if the parent dies
	// without stopping it (Linux only); zero means SIGKILL. A child with
	// children of its own needs one it handles by taking them down too
	// (SIGTERM for nginx, whose workers would outlive a killed master).
	DeathSignal syscall.Signal
}

// Process is one running child.
type Process struct {
	Name string
	Pid  int // also its process group's id

	done chan struct{} // closed once the child has exited and been reaped
	err  error         // Wait's result; read only after done
	cpu  time.Duration // user + system time, its waited-for children's included; after done
}

// ErrExited is wrapped by waits that end because the child exited first.
var ErrExited = errors.New("child process exited")

// Start runs s and returns once the child is running.
func Start(s Spec) (*Process, error) {
	p := &Process{Name: s.Name, done: make(chan struct{})}
	out := s.Output
	if out == nil {
		out = io.Discard
	}
	var lines *lineWriter
	if s.OnLine != nil {
		lines = &lineWriter{out: out, fn: s.OnLine}
		out = lines
	}
	sig := s.DeathSignal
	if sig == 0 {
		sig = syscall.SIGKILL
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the child
		defer close(p.done)
		cmd := exec.Command(s.Path, s.Args...)
		cmd.Env, cmd.Dir = s.Env, s.Dir
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = sysProcAttr(sig)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.Pid = cmd.Process.Pid
		started <- nil
		p.err = cmd.Wait() // also waits for the output to be copied
		if lines != nil {
			lines.flush()
		}
		if st := cmd.ProcessState; st != nil {
			p.cpu = st.UserTime() + st.SystemTime()
		}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.Name, err)
	}
	return p, nil
}

// Done is closed once the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err waits for the child to exit and says how (exec.Cmd.Wait's error).
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// CPU waits for the child to exit and returns the user and system time it
// used, with the children it waited for.
func (p *Process) CPU() time.Duration {
	<-p.done
	return p.cpu
}

// Exited reports whether the child has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the child's process group (to the child alone where
// there are no groups).
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	return signalGroup(p.Pid, sig)
}

// Kill sends SIGKILL to the child's group, as a crash would, and returns
// once the child is reaped.
func (p *Process) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop ends the child as an orchestrator would: SIGTERM to its group, then
// SIGKILL once grace has passed. It returns once the child is reaped, and
// reports whether it exited within grace (how: Err).
func (p *Process) Stop(grace time.Duration) (inTime bool) {
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		inTime = true
	case <-t.C:
	}
	// Whatever is left of the group (the leader, or children that outlived
	// it) is killed outright.
	_ = signalGroup(p.Pid, syscall.SIGKILL)
	<-p.done
	return inTime
}

// WaitHTTP polls url until its answer passes ok (nil: any answer at all),
// the child exits (an error wrapping ErrExited), or ctx ends.
func WaitHTTP(ctx context.Context, p *Process, url string, ok func(status int) bool) error {
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 2 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := errors.New("no answer yet")
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if ok == nil || ok(resp.StatusCode) {
				return nil
			}
			last = fmt.Errorf("answered %s", resp.Status)
		} else {
			last = err
		}
		select {
		case <-p.done:
			return fmt.Errorf("%w: %s (%v) before %s answered", ErrExited, p.Name, p.err, url)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w (last: %v)", p.Name, url, context.Cause(ctx), last)
		case <-tick.C:
		}
	}
}

// maxLine bounds one line handed to OnLine; the rest of a longer one is
// dropped (it still reaches Output whole).
const maxLine = 4 << 20

// lineWriter passes output on, and splits it into lines for fn.
type lineWriter struct {
	out io.Writer
	fn  func(string)

	mu      sync.Mutex
	partial []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.out.Write(b) // output is best effort; the lines must all come
	rest := b
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		w.emit(rest[:i])
		rest = rest[i+1:]
	}
	if room := maxLine - len(w.partial); room > 0 {
		w.partial = append(w.partial, rest[:min(len(rest), room)]...)
	}
	return len(b), nil
}

// emit hands fn the line that ends with tail. w.mu must be held.
func (w *lineWriter) emit(tail []byte) {
	line := tail
	if len(w.partial) > 0 {
		if room := maxLine - len(w.partial); room > 0 {
			w.partial = append(w.partial, tail[:min(len(tail), room)]...)
		}
		line, w.partial = w.partial, nil
	} else if len(line) > maxLine {
		line = line[:maxLine]
	}
	w.fn(string(bytes.TrimSuffix(line, []byte("\r"))))
}

// flush hands fn a last line that had no newline.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.emit(nil)
	}
}
