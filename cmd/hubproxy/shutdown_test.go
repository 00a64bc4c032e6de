package main

import (
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
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
	p := startServe(t, bin, nil, "--upstream", h.URL, "--cache-dir", t.TempDir(), "--cache-min-free-bytes", "0",
		"--admin-listen", "", "--shutdown-timeout", "1s")
	resp, err := http.Get("http://" + p.addr + "/org/slow/resolve/main/w.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.CopyN(io.Discard, resp.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGTERM)
	go io.Copy(io.Discard, resp.Body) // the client keeps reading until cut
	select {
	case <-p.Done(): // its log is whole now, to the last line
	case <-time.After(2 * time.Minute):
		t.Fatalf("no exit within 2 minutes of SIGTERM:\n%s", p.log())
	}
	if err := p.Err(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	all := p.log()
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
