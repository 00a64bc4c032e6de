package soak

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedfill"
	"github.com/hubproxy/hubproxy/internal/sharedstore"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

func TestChunkKeysAndObjects(t *testing.T) {
	etag := "ab12"
	// The key hubproxy puts a chunk at, read by the scan's own parse.
	key := storePrefix + "/" + sharedfill.ChunkKey(etag, 262144, 3)
	c, ok := parseChunkKey(key)
	if !ok || c.etag != etag || c.size != 262144 || c.index != 3 {
		t.Fatalf("%s parsed %+v %v", key, c, ok)
	}
	shard := key[len(layoutKeyPrefix) : len(layoutKeyPrefix)+2]
	other := "00"
	if shard == other {
		other = "01"
	}
	claim := strings.Replace(strings.Replace(key, "/chunks/", "/claims/", 1), "/262144/3", "/262144/3/0", 1)
	if !isClaimKey(claim) {
		t.Errorf("%s is not a claim", claim)
	}
	for _, bad := range []string{strings.TrimSuffix(key, "/3"), strings.Replace(key, "/262144/", "/x/", 1), claim,
		strings.Replace(key, "/"+shard+"/", "/"+other+"/", 1), layoutKeyPrefix + "chunks/" + etag + "/262144/3"} {
		if _, ok := parseChunkKey(bad); ok {
			t.Errorf("%s parsed as a chunk", bad)
		}
	}
	// An object as hubproxy seals it, checked by the scan's own reading of
	// the format: the two must agree, or the scan is no oracle.
	data := []byte("chunk bytes of a file")
	c = chunkRef{etag: strings.Repeat("ab", 32), size: 64, index: 0}
	obj := sealedByHubproxy(t, c.etag, data)
	if got, err := payloadOf(c, obj); err != nil || string(got) != string(data) {
		t.Fatalf("payload %q %v", got, err)
	}
	moved := c
	moved.index = 1
	if _, err := payloadOf(moved, obj); err == nil {
		t.Error("a chunk's object passed at another index")
	}
	obj[2] ^= 1
	if _, err := payloadOf(c, obj); err == nil {
		t.Error("a changed object passed its seal")
	}
	obj[2] ^= 1
	sum := sha256.Sum256(data)
	if _, err := payloadOf(c, append(append([]byte(nil), data...), sum[:]...)); err == nil {
		t.Error("an object of the bytes and their sha256 (layout v2) passed")
	}
	if _, err := payloadOf(c, []byte("short")); err == nil {
		t.Error("an object shorter than a seal passed")
	}
}

// sealedByHubproxy is the object hubproxy's sharing puts for a one-chunk
// file of data, under the soak's secret.
func sealedByHubproxy(t *testing.T, etag string, data []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	store, err := sharedstore.Open(context.Background(), "file://"+dir, sharedstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sharedfill.New(store, sharedfill.Options{Secret: []byte(chunkSecret), ChunkSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	body, err := s.Origin(etag, int64(len(data)), bytesUpstream(data)).FetchRange(context.Background(), 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, body)
	body.Close()
	// The flight puts the chunk after its reader has the bytes, and Close
	// cancels a put still running: wait for the object first.
	var obj []byte
	testutil.Eventually(t, 10*time.Second, "the chunk in the store", func() bool {
		obj, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(sharedfill.ChunkKey(etag, 64, 0))))
		return err == nil
	})
	s.Close()
	return obj
}

type bytesUpstream []byte

func (b bytesUpstream) FetchRange(_ context.Context, off, n int64) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b[off : off+n])), nil
}

func TestClaimOwners(t *testing.T) {
	owner := claimOwner([]byte(`{"owner":"node-a-1234-9f8e7d6c","beat":2,"time":"2026-01-01T00:00:00Z"}`))
	if owner != "node-a-1234-9f8e7d6c" || ownerPID(owner) != 1234 {
		t.Fatalf("owner %q, pid %d", owner, ownerPID(owner))
	}
	if ownerPID("garbage") != 0 || claimOwner([]byte("{}")) != "" {
		t.Error("a claim without an owner named one")
	}
}

// The stretches a proxy served around the store come from its log lines,
// widened for answers in flight, and close with its incarnation.
func TestStoreEvents(t *testing.T) {
	ev := newStoreEvents()
	t0 := time.Now()
	ev.note(logEntry{Msg: storeDownMsgs[0]}, t0)
	ev.note(logEntry{Msg: storeDownMsgs[0]}, t0.Add(time.Second)) // still the same stretch
	ev.note(logEntry{Msg: storeUpMsg}, t0.Add(5*time.Second))
	ev.note(logEntry{Msg: storeDownMsgs[1]}, t0.Add(time.Minute))
	ev.closeDown(t0.Add(61 * time.Second))
	if len(ev.down) != 2 {
		t.Fatalf("%d stretches, want 2", len(ev.down))
	}
	for _, c := range []struct {
		at  time.Duration
		off bool
	}{{-2 * time.Second, false}, {0, true}, {5*time.Second + storeGrace - time.Millisecond, true}, {30 * time.Second, false}, {61 * time.Second, true}} {
		if got := ev.offStore(t0.Add(c.at)); got != c.off {
			t.Errorf("at %v: off the store %v, want %v", c.at, got, c.off)
		}
	}
	ev.note(logEntry{Msg: "shared store: chunk object does not match its digest; deleting it", Key: sharedfill.ChunkKey("e1", 262144, 0)}, t0)
	ev.note(logEntry{Msg: storeForgetMsgs[0], ETag: "e2"}, t0)
	ev.note(logEntry{Msg: "shared store: something new"}, t0)
	if ev.chunks["e1"] != 1 || ev.forgets["e2"] != 1 || ev.other["shared store: something new"] != 1 {
		t.Errorf("chunks %v, forgets %v, other %v", ev.chunks, ev.forgets, ev.other)
	}
}

func TestStoreFigures(t *testing.T) {
	page := `# HELP hubproxy_store_claims_total x
hubproxy_store_claims_total{result="taken_over"} 2
hubproxy_store_claims_total{result="waited"} 5
hubproxy_store_claims_total{result="won"} 7
hubproxy_store_bytes_total{direction="read"} 1e+06
hubproxy_store_bytes_total{direction="written"} 300
hubproxy_store_requests_total{op="get",result="ok"} 10
hubproxy_store_requests_total{op="put",result="error"} 1
hubproxy_store_errors_total{op="put"} 1
hubproxy_store_up 1
`
	f := parseStoreFigures(page)
	want := storeFigures{Won: 7, Waited: 5, TakenOver: 2, Read: 1e6, Written: 300, Requests: 11, Errors: 1}
	if f != want {
		t.Fatalf("%+v, want %+v", f, want)
	}
	f.add(want)
	if f.Won != 14 || f.Read != 2e6 {
		t.Errorf("sum %+v", f)
	}
}
