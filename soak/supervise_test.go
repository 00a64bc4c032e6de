package soak

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
)

// The soak's store is the tests' MinIO, launched the same way: it serves
// its bucket, survives a SIGKILL and restart on its data, and refuses a
// second kill while down.
func TestObjectStoreKillAndRestart(t *testing.T) {
	st, err := startStore(miniotest.Binary(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	ctx := context.Background()
	put := func(key string) error {
		_, err := st.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(storeBucket), Key: aws.String(key), Body: strings.NewReader("x")})
		return err
	}
	if err := put("before"); err != nil {
		t.Fatal(err)
	}
	if err := st.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := st.Kill(); err == nil {
		t.Error("a second kill of a stopped store succeeded")
	}
	if err := put("while-down"); err == nil {
		t.Error("a killed store answered")
	}
	if err := st.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(storeBucket), Key: aws.String("before")}); err != nil {
		t.Errorf("an object put before the restart: %v", err)
	}
	if !strings.Contains(st.URL(), "endpoint="+st.relay.URL()) || !strings.Contains(strings.Join(st.env(), " "), "AWS_ACCESS_KEY_ID="+storeUser) {
		t.Errorf("URL %s, env %v", st.URL(), st.env())
	}
}

// A proxy incarnation is ready once it logged both its addresses; kill and
// stop end it without calling exited, and an exit the driver did not cause
// does call it. The binary is a script that logs as hubproxy does.
func TestProxyIncarnations(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-hubproxy")
	// The trap comes first: the driver may stop the process as soon as it
	// has logged its addresses, and a TERM before the trap kills sh by signal.
	script := `#!/bin/sh
trap 'exit 0' TERM
echo '{"level":"INFO","msg":"hubproxy serving","addr":"127.0.0.1:1"}'
echo '{"level":"INFO","msg":"admin API serving","addr":"127.0.0.1:2"}'
[ "$1" = crash ] && exit 3
while :; do sleep 0.05; done
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sink, err := newLogSink(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.close()
	exits := make(chan *incarnation, 1)
	p := &proxy{name: "p", bin: bin, sink: sink, exited: func(_ *proxy, inc *incarnation) { exits <- inc }}
	inc, err := p.start()
	if err != nil {
		t.Fatal(err)
	}
	if addr, n := p.address(); addr != "127.0.0.1:1" || n != 1 || inc.admin != "127.0.0.1:2" || inc.pid == 0 {
		t.Fatalf("address %q incarnation %d admin %q pid %d", addr, n, inc.admin, inc.pid)
	}
	if p.kill() != inc || p.current() != nil {
		t.Fatal("kill did not end the current incarnation")
	}
	if _, err := p.start(); err != nil {
		t.Fatal(err)
	}
	if err := p.stop(); err != nil {
		t.Errorf("stop of a process that exits 0 on SIGTERM: %v", err)
	}
	p.args = []string{"crash"}
	crashed, err := p.start()
	if err != nil {
		// It may exit before start saw it serve; either way it is no
		// incarnation of the driver's making.
		t.Logf("a crashing start: %v", err)
		return
	}
	if got := <-exits; got != crashed || got.exitErr() == nil {
		t.Errorf("exited told of %v (%v), want incarnation %d's exit", got, got.exitErr(), crashed.n)
	}
	select {
	case inc := <-exits:
		t.Errorf("exited told of incarnation %d, which the driver ended", inc.n)
	default:
	}
	if tail := strings.Join(sink.tail(20), "\n"); !strings.Contains(tail, "--- p incarnation 1, pid") ||
		strings.Index(tail, "--- p incarnation 1") > strings.Index(tail, "hubproxy serving") {
		t.Errorf("the sink's header does not come before the incarnation's lines:\n%s", tail)
	}
}
