//go:build unix

package child

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/testutil"
)

func sh(t *testing.T, script string, onLine func(string)) *Process {
	t.Helper()
	p, err := Start(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}, OnLine: onLine})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// Every line of the output reaches OnLine before Done, the last one too
// when it has no newline, and Output gets the bytes as they were.
func TestOnLineGetsEveryLineBeforeDone(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	var out strings.Builder
	p, err := Start(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", `echo one; echo two >&2; printf 'th'; printf 'ree\r\nlast'`},
		Output: &out, OnLine: func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(lines, "|"); got != "one|two|three|last" {
		t.Errorf("lines %q", got)
	}
	if out.String() != "one\ntwo\nthree\r\nlast" {
		t.Errorf("output %q", out.String())
	}
}

// Stop sends SIGTERM and reports a child that exits on it as in time; one
// that ignores it is killed once the grace has passed, its group's other
// members too.
func TestStopTermsThenKills(t *testing.T) {
	polite := sh(t, `trap 'exit 0' TERM; while :; do sleep 0.01; done`, nil)
	time.Sleep(50 * time.Millisecond) // let the shell install its trap; a TERM before it also ends it, in time
	if !polite.Stop(5 * time.Second) {
		t.Error("a child that exits on SIGTERM was not in time")
	}
	started := make(chan string, 1)
	var once sync.Once
	stubborn := sh(t, `trap '' TERM; sleep 60 & echo $!; wait`, func(l string) { once.Do(func() { started <- l }) })
	sleepPid, err := strconv.Atoi(strings.TrimSpace(<-started))
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if stubborn.Stop(100 * time.Millisecond) {
		t.Error("a child that ignores SIGTERM was in time")
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("Stop took %v", d)
	}
	var ee *exec.ExitError
	if err := stubborn.Err(); !errors.As(err, &ee) {
		t.Errorf("Err = %v, want the SIGKILL's exit", err)
	}
	// The group's sleep was killed too. Whoever inherited it reaps it, or,
	// in a container whose first process reaps nothing, it stays a zombie:
	// dead either way.
	testutil.Eventually(t, 10*time.Second, "the child's group to be dead after Stop", func() bool {
		return dead(sleepPid)
	})
}

// WaitHTTP returns once the URL answers as asked, and fails at once, with
// ErrExited, when the child exits first.
func TestWaitHTTP(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p := sh(t, `sleep 60`, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := WaitHTTP(ctx, p, srv.URL, func(s int) bool { return s == http.StatusOK }); err != nil || n.Load() != 3 {
		t.Fatalf("WaitHTTP = %v after %d answers", err, n.Load())
	}
	gone := sh(t, `exit 3`, nil)
	if err := WaitHTTP(ctx, gone, "http://127.0.0.1:1/", nil); !errors.Is(err, ErrExited) {
		t.Fatalf("WaitHTTP on an exited child = %v", err)
	}
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if err := WaitHTTP(short, p, "http://127.0.0.1:1/", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitHTTP past its context = %v", err)
	}
}

func TestStartFails(t *testing.T) {
	if _, err := Start(Spec{Name: "nothing", Path: "/nonexistent/binary"}); err == nil || !strings.Contains(err.Error(), "nothing") {
		t.Fatalf("Start = %v", err)
	}
}

// dead reports whether pid has exited: gone, or a zombie nobody reaped
// (Linux's /proc says which; elsewhere only gone counts).
func dead(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist) && runtime.GOOS == "linux"
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold any character: read after the last ')'.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	f := strings.Fields(string(rest))
	return len(f) > 0 && f[0] == "Z"
}
