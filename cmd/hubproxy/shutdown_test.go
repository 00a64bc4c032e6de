package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// SIGTERM during a long download drains for shutdown-timeout, then cuts what
// is still running, says how many transfers it cut, and exits 0.
func TestSIGTERMDrainsThenCutsAndExitsCleanly(t *testing.T) {
	bin := buildBinary(t)
	h := hubtest.NewT(t, hubtest.Options{BandwidthPerConn: 1 << 20})
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/slow", Files: []hubtest.File{
		{Path: "w.safetensors", Data: hubtest.RandomBytes(5, 64<<20)},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--upstream", h.URL,
		"--cache-dir", t.TempDir(), "--cache-min-free-bytes", "0", "--admin-listen", "",
		"--shutdown-timeout", "1s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		logs []string
	)
	addr := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs = append(logs, sc.Text())
			mu.Unlock()
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	resp, err := http.Get("http://" + <-addr + "/org/slow/resolve/main/w.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.CopyN(io.Discard, resp.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	go io.Copy(io.Discard, resp.Body) // the client keeps reading until cut
	// Read the log to its end before Wait, which closes the pipe and would
	// drop the last lines (the one this test looks for) if they were still
	// in it.
	<-scanned
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(logs, "\n")
	if !strings.Contains(all, "cut=1") {
		t.Errorf("no log line says one transfer was cut:\n%s", all)
	}
	if strings.Contains(all, "deadline exceeded") {
		t.Errorf("the shutdown reported an error:\n%s", all)
	}
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hubproxy")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
