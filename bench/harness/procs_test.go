package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopKillsTheWholeGroup starts a shell that leaves a grandchild
// running, as nginx's master leaves workers, and checks that stop ends both.
func TestStopKillsTheWholeGroup(t *testing.T) {
	g := newProcs()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild")
	// The shell ignores TERM, so stop must escalate to KILL.
	script := "trap '' TERM; sleep 60 & echo $! > " + pidFile + "; wait"
	p, err := g.start("sh", "/bin/sh", []string{"-c", script}, os.Environ(), filepath.Join(dir, "log"), syscall.SIGKILL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.stopAll)
	var grandchild int
	for deadline := time.Now().Add(10 * time.Second); grandchild == 0; {
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell never started its grandchild")
		}
		time.Sleep(10 * time.Millisecond) // waiting on another process's file
	}
	members := groupMembers(p.Pid)
	if len(members) != 2 {
		t.Fatalf("group %d has members %v, want the shell and its grandchild", p.Pid, members)
	}
	if st, err := readStat(grandchild); err != nil || st.pgrp != p.Pid {
		t.Fatalf("grandchild %d: stat %+v, %v; want group %d", grandchild, st, err, p.Pid)
	}
	n, err := peakRSS(p.Pid)
	if err != nil || n <= 0 {
		t.Fatalf("peakRSS = %d, %v", n, err)
	}
	if cpu, err := groupCPU(p.Pid); err != nil || cpu < 0 {
		t.Fatalf("groupCPU = %v, %v", cpu, err)
	}

	g.stop(p, 100*time.Millisecond)
	if left := groupMembers(p.Pid); len(left) != 0 {
		t.Fatalf("processes %v of group %d survived stop", left, p.Pid)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("stop returned before the child was reaped")
	}
	if got := g.startedGroups(); len(got) != 1 || got[0] != p.Pid {
		t.Errorf("startedGroups = %v, want [%d]", got, p.Pid)
	}
	if _, err := peakRSS(p.Pid); err == nil {
		t.Error("peakRSS of a stopped group succeeded")
	}
	if _, err := groupCPU(p.Pid); err == nil {
		t.Error("groupCPU of a stopped group succeeded")
	}
}

func TestStartFailure(t *testing.T) {
	g := newProcs()
	if _, err := g.start("missing", filepath.Join(t.TempDir(), "no-such-binary"), nil, nil, filepath.Join(t.TempDir(), "log"), syscall.SIGKILL); err == nil {
		g.stopAll()
		t.Fatal("starting a missing binary succeeded")
	}
	if len(g.startedGroups()) != 0 {
		t.Error("a failed start was recorded")
	}
}

func TestReadStatOddComm(t *testing.T) {
	st, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.pid != os.Getpid() || st.pgrp <= 0 || st.state == 0 || st.cpu < 0 {
		t.Errorf("readStat(self) = %+v", st)
	}
	if selfCPU() <= 0 || machineCPU() <= 0 {
		t.Errorf("selfCPU = %v, machineCPU = %v", selfCPU(), machineCPU())
	}
}
