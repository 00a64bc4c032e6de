package main

import (
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/sharedfill"
	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// TestClusterOwnerKilledMidChunk runs real hubproxy processes on one MinIO
// store: node A starts fetching a file's chunks for the cluster and is killed
// with SIGKILL mid-chunk, leaving its claims behind, unreleased. Node B,
// reading the same file, must take the chunks over once A's claims go
// unrenewed for the lease, and serve the file whole and right.
func TestClusterOwnerKilledMidChunk(t *testing.T) {
	bin := buildBinary(t)
	m := miniotest.Start(t)
	// Slow enough per connection that A is mid-chunk when killed.
	h := hubtest.NewT(t, hubtest.Options{BandwidthPerConn: 256 << 10})
	data := hubtest.RandomBytes(7, 6<<20)
	want := sha256.Sum256(data)
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/kill", Files: []hubtest.File{{Path: "w.safetensors", Data: data}}})
	args := []string{"--upstream", h.URL, "--chunk-size", "1MiB", "--cache-min-free-bytes", "0",
		"--shared-store", m.URL("kill"), "--shared-store-lease", "1s", "--admin-listen", "",
		"--shared-store-secret-file", secretFile(t)}
	url := "/org/kill/resolve/main/w.safetensors"

	a := startServe(t, bin, m.Env(), append([]string{"--cache-dir", t.TempDir()}, args...)...)
	resp, err := http.Get("http://" + a.addr + url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// A has claimed chunks and is fetching them.
	claims := func() int {
		out, err := m.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
			Bucket: aws.String(miniotest.Bucket), Prefix: aws.String("kill/")})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, o := range out.Contents {
			if sharedfill.IsClaimKey(strings.TrimPrefix(aws.ToString(o.Key), "kill/")) {
				n++
			}
		}
		return n
	}
	testutil.Eventually(t, 30*time.Second, "node A's claims in the store", func() bool { return claims() > 0 })
	a.Kill()
	if n := claims(); n == 0 {
		t.Fatal("A's claims vanished with it; the test needs them left behind")
	}

	h.SetFaults(hubtest.Faults{BandwidthPerConn: 32 << 20})
	b := startServe(t, bin, m.Env(), append([]string{"--cache-dir", t.TempDir()}, args...)...)
	defer b.Kill()
	addrB := b.addr
	start := time.Now()
	got, err := httpGet("http://" + addrB + url)
	if err != nil || sha256.Sum256(got) != want {
		t.Fatalf("node B: %v, %d bytes, sha ok %v", err, len(got), sha256.Sum256(got) == want)
	}
	taken := scrape(t, "http://"+addrB+"/metrics", `hubproxy_store_claims_total{result="taken_over"}`)
	t.Logf("node B served the file in %v, taking over %v chunks from the killed node", time.Since(start).Round(time.Millisecond), taken)
	if taken < 1 {
		t.Errorf("node B took no chunk over (claims_total{taken_over} = %v)", taken)
	}
	if n := claims(); n != 0 {
		t.Errorf("%d claims left in the store after B finished", n)
	}
}

func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// scrape returns the value of the sample line that starts with series.
func scrape(t *testing.T, url, series string) float64 {
	t.Helper()
	b, err := httpGet(url)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("%s: no %s", url, series)
	return 0
}

// secretFile writes a shared-store secret for the test's nodes.
func secretFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "store-secret")
	if err := os.WriteFile(p, []byte("cmd-cluster-test-secret-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
