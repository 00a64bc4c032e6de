package harness

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
)

// The cluster scenario's MinIO is launched as the tests launch it, counts
// as one of the run's children (stopAll and the leak check see it), and
// every restart begins on an empty data directory, the last one removed.
func TestMinioRestartsColdAndIsTracked(t *testing.T) {
	g := newProcs()
	t.Cleanup(g.stopAll)
	m := &minio{bin: miniotest.Binary(t), procs: g, workDir: t.TempDir()}
	ctx := context.Background()
	if err := m.restart(ctx); err != nil {
		t.Fatal(err)
	}
	first, firstDir := m.p, m.dir
	if got := g.startedGroups(); len(got) != 1 || got[0] != first.Pid {
		t.Fatalf("startedGroups = %v, want MinIO's %d", got, first.Pid)
	}
	if u := m.url("rep-1"); !strings.HasPrefix(u, "s3://"+miniotest.Bucket+"/rep-1?endpoint=http://127.0.0.1:") {
		t.Errorf("url %s", u)
	}
	if err := m.restart(ctx); err != nil {
		t.Fatal(err)
	}
	if !first.Exited() {
		t.Error("the first MinIO outlived the restart")
	}
	if _, err := os.Stat(firstDir); !os.IsNotExist(err) {
		t.Errorf("the first run's data is still there: %v", err)
	}
	if m.dir == firstDir || len(g.startedGroups()) != 2 {
		t.Errorf("restart reused %s; groups %v", m.dir, g.startedGroups())
	}
	last := m.p
	m.stop()
	if !last.Exited() || m.p != nil {
		t.Error("stop left MinIO running")
	}
}
