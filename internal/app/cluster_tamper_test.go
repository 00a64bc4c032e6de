package app_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/sharedfill"
	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// tamperSetup has one node fill the store with a file's chunks and returns
// the file, its path, and the key and stored object of its chunk 3.
func tamperSetup(t *testing.T, c *cluster, id string) (data []byte, path, key string, obj []byte) {
	t.Helper()
	const size = 5<<20 + 77
	data = c.addModel(id, size, nil)
	path = "/" + id + "/resolve/main/model.safetensors"
	readAll(t, []*node{c.node(nil)}, 1, path, data)
	etag := sum(data)
	testutil.Eventually(t, time.Minute, "the file's 6 chunks in the store", func() bool {
		for i := range int64(6) {
			_, err := c.minio.Client().HeadObject(context.Background(), &s3.HeadObjectInput{
				Bucket: aws.String(miniotest.Bucket), Key: aws.String("cluster/" + sharedfill.ChunkKey(etag, clusterChunk, i))})
			if err != nil {
				return false
			}
		}
		return true
	})
	key = "cluster/" + sharedfill.ChunkKey(etag, clusterChunk, 3)
	return data, path, key, getObject(t, c.minio, key)
}

// A stored chunk changed through the S3 API (same size, other bytes) is
// never served, not even to a range reader, who gets no help from the
// file's hash: the node checks each chunk against the digest it carries,
// drops the changed one and fetches that chunk again. Found by the soak,
// where range and tensor readers got the changed bytes.
func TestClusterCorruptObjectRepaired(t *testing.T) {
	c := newCluster(t, "s3", hubtest.Options{})
	data, path, key, obj := tamperSetup(t, c, "org/tamper")
	bad := bytes.Clone(obj)
	bad[1000] ^= 0xff
	putObject(t, c.minio, key, bad)

	second := c.node(nil)
	c.hub.ResetCounters()
	from := 3*clusterChunk + 900
	status, body, err := second.get(t, path, "Range", fmt.Sprintf("bytes=%d-%d", from, from+199))
	if err != nil || status != http.StatusPartialContent || !bytes.Equal(body, data[from:from+200]) {
		t.Fatalf("a range over the changed bytes: %d %v, right bytes %v", status, err, bytes.Equal(body, data[from:from+200]))
	}
	readAll(t, []*node{second}, 1, path, data)
	if got := second.metric(t, "hubproxy_cache_verify_failures_total", ""); got != 0 {
		t.Errorf("verify failures %v: the changed chunk reached the cache", got)
	}
	if got := c.hub.Counters().BodyBytes; got != clusterChunk {
		t.Errorf("the repair fetched %d bytes upstream, want the one chunk's %d", got, clusterChunk)
	}
	testutil.Eventually(t, time.Minute, "the changed chunk's object repaired", func() bool { return bytes.Equal(getObject(t, c.minio, key), obj) })
}

// A stored chunk whose bytes rot on MinIO's disk reads as an error (503:
// MinIO's checksums catch it) while MinIO still answers for the object.
// That is one bad object, not a failing store: the node drops and refetches
// the chunk, and keeps sharing through the store. Found by the soak, where
// each read of such a chunk took the store out of use on the node that read
// it, and the object was never repaired.
func TestClusterRottenObjectRepaired(t *testing.T) {
	c := newCluster(t, "s3", hubtest.Options{})
	data, path, key, obj := tamperSetup(t, c, "org/rot")
	rot(t, c.minio, key, obj[1000:1064])

	second := c.node(nil)
	c.hub.ResetCounters()
	from := 3*clusterChunk + 900
	status, body, err := second.get(t, path, "Range", fmt.Sprintf("bytes=%d-%d", from, from+199))
	if err != nil || status != http.StatusPartialContent || !bytes.Equal(body, data[from:from+200]) {
		t.Fatalf("a range over the rotten bytes: %d %v", status, err)
	}
	if up := second.metric(t, "hubproxy_store_up", ""); up != 1 {
		t.Errorf("hubproxy_store_up %v after reading one rotten object: the node stopped using the store", up)
	}
	if got := c.hub.Counters().BodyBytes; got != clusterChunk {
		t.Errorf("the repair fetched %d bytes upstream, want the one chunk's %d", got, clusterChunk)
	}
	testutil.Eventually(t, time.Minute, "the rotten chunk's object repaired", func() bool { return bytes.Equal(getObject(t, c.minio, key), obj) })
}

// rot flips a byte of an object in MinIO's files, found by the bytes around
// it (the object's part file, or its metadata file for an inline object).
func rot(t *testing.T, m *miniotest.Server, key string, near []byte) {
	t.Helper()
	dir := filepath.Join(m.DataDir(), miniotest.Bucket, filepath.FromSlash(key))
	var done bool
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || done {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if i := bytes.Index(b, near); i >= 0 {
			b[i+10] ^= 0xff
			done = os.WriteFile(p, b, 0o644) == nil
		}
		return nil
	})
	if !done {
		t.Fatalf("found no file under %s holding the object's bytes", dir)
	}
}

func getObject(t *testing.T, m *miniotest.Server, key string) []byte {
	t.Helper()
	out, err := m.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(miniotest.Bucket), Key: aws.String(key)})
	if err != nil {
		return nil
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	return b
}
