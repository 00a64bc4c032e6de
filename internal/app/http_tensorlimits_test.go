package app_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// A valid file whose header is 20 MiB (within the reference reader's 100 MB,
// over hubproxy's 16 MiB) is refused from its 8-byte length prefix: the
// listing is 502 InvalidSafetensors saying so, and only the first block of
// the file is fetched, never the 20 MiB header.
func TestHeaderOverTheLimitIsNotFetched(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	js := `{"__metadata__":{"format":"pt"},"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`
	js += strings.Repeat(" ", 20<<20-len(js))
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	file = append(append(file, js...), 1, 2, 3, 4)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "model.safetensors", Data: file}}})
	e.Hub.ResetCounters()

	resp, body := e.Do(http.MethodGet, "/models/org/model/tensors")
	var msg struct{ Error string }
	json.Unmarshal(body, &msg)
	t.Logf("%d %s", resp.StatusCode, msg.Error)
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Error-Code") != "InvalidSafetensors" ||
		!strings.Contains(msg.Error, "model.safetensors") || !strings.Contains(msg.Error, "limit of 16777216") {
		t.Errorf("%d %q; want 502 InvalidSafetensors naming the file and the limit", resp.StatusCode, msg.Error)
	}
	if _, n := cdnStats(e.Hub, "model.safetensors"); n > 2*blockSize {
		t.Errorf("fetched %d bytes of a header it refuses (limit %d)", n, 2*blockSize)
	}
}

// The listing is written as it is encoded, not built whole: with the header
// cached, listing 50,000 tensors (some 6 MB of JSON) allocates a small
// fraction of the JSON's size. Built whole and marshalled, it allocated
// about ten times the JSON. HEAD announces the GET's length.
func TestTensorListingIsStreamed(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	const n = 50_000
	ts := make([]hubtest.Tensor, n)
	for i := range ts {
		ts[i] = hubtest.Tensor{Name: fmt.Sprintf("model.layers.%d.mlp.experts.%d.weight", i/256, i%256), DType: "U8", Shape: []int64{1}, Data: []byte{byte(i)}}
	}
	file := hubtest.Safetensors(ts, map[string]string{"format": "pt"})
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "model.safetensors", Data: file}}})
	get := func(method string) (status int, length string, body int64) {
		t.Helper()
		req, err := http.NewRequest(method, e.Proxy.URL+"/models/org/model/tensors", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Length"), got
	}
	if status, _, _ := get(http.MethodGet); status != 200 { // parses and caches the header
		t.Fatalf("listing: %d", status)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	status, length, size := get(http.MethodGet)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("listing of %d tensors: %d bytes of JSON, %d bytes allocated by the whole process meanwhile", n, size, alloc)
	if status != 200 || length != strconv.FormatInt(size, 10) {
		t.Fatalf("listing: %d, Content-Length %s for %d bytes", status, length, size)
	}
	if alloc > uint64(size)/4 {
		t.Errorf("a %d-byte listing of a cached header allocated %d bytes: it was built whole", size, alloc)
	}
	if status, hl, _ := get(http.MethodHead); status != 200 || hl != length {
		t.Errorf("HEAD: %d, Content-Length %s; GET sent %s", status, hl, length)
	}
	// And it is the listing.
	resp, body := e.Do(http.MethodGet, "/models/org/model/tensors")
	var l listing
	if err := json.Unmarshal(body, &l); err != nil || resp.StatusCode != 200 || len(l.Tensors) != n || l.Totals.Tensors != n || l.Tensors[n-1].Name != ts[n-1].Name {
		t.Fatalf("listing: %d, %v, %d tensors", resp.StatusCode, err, len(l.Tensors))
	}
}
