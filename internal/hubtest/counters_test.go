package hubtest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestCountersCountBodyBytesExactly(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	url := cdnURL(t, h, "model.safetensors") // 1 resolve request
	h.ResetCounters()

	do(t, "GET", url)                                            // whole weights
	do(t, "GET", url, "Range: bytes=0-99")                       // 100
	do(t, "HEAD", url)                                           // 0
	do(t, "GET", url, "Range: bytes=99999999-")                  // 416: 0
	do(t, "GET", h.URL+"/acme/model/raw/main/config.json")       // config
	do(t, "GET", h.URL+"/acme/model/raw/main/model.safetensors") // the pointer
	resp, _ := do(t, "GET", h.URL+"/acme/model/resolve/main/sub/dir/notes.txt")
	do(t, "GET", h.URL+resp.Header.Get("Location"), "Range: bytes=1-") // notes minus one
	do(t, "GET", h.URL+"/api/models/acme/model/tree/main")             // JSON: not counted

	c := h.Counters()
	weights := int64(len(f.weights) + 100)
	want := map[string]int64{
		"acme/model/model.safetensors": weights + int64(len(refPointer(f.weights))),
		"acme/model/config.json":       int64(len(f.config)),
		"acme/model/sub/dir/notes.txt": int64(len(f.notes) - 1),
	}
	var sum int64
	for k, v := range want {
		sum += v
		if c.BytesByPath[k] != v {
			t.Errorf("BytesByPath[%s] = %d, want %d", k, c.BytesByPath[k], v)
		}
	}
	if len(c.BytesByPath) != len(want) || c.BodyBytes != sum {
		t.Errorf("BodyBytes %d, want %d; BytesByPath %v", c.BodyBytes, sum, c.BytesByPath)
	}
	if c.Requests != 9 || c.CDNRequests != 4 || c.ResolveRequests != 4 || c.APIRequests != 1 {
		t.Errorf("counters %+v", c)
	}

	log := h.Requests()
	if len(log) != 9 {
		t.Fatalf("%d log records", len(log))
	}
	first := log[0]
	if first.Method != "GET" || !strings.HasPrefix(h.CDNURL, "http://"+first.Host) ||
		!strings.HasPrefix(first.Path, "/blobs/") || first.Status != 200 || first.HadAuth || first.Query == "" {
		t.Errorf("first record %+v", first)
	}
	if log[1].Range != "bytes=0-99" || log[1].Status != 206 || log[3].Status != 416 {
		t.Errorf("records %+v", log[1:4])
	}
}

func TestCountersUnderConcurrency(t *testing.T) {
	h := NewT(t, Options{})
	f := addFixture(t, h)
	url := cdnURL(t, h, "model.safetensors")
	h.ResetCounters()
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", i*10, i*10+9))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if !bytes.Equal(b, f.weights[i*10:i*10+10]) {
				t.Errorf("range %d differs", i)
			}
		})
	}
	wg.Wait()
	if c := h.Counters(); c.BodyBytes != n*10 || c.CDNRequests != n {
		t.Errorf("BodyBytes %d, CDNRequests %d", c.BodyBytes, c.CDNRequests)
	}
}

func TestRequestLogIsBounded(t *testing.T) {
	h := &Hub{}
	h.stats.reset()
	for i := range maxLog + 5 {
		h.stats.log(RequestRecord{Status: i})
	}
	log := h.Requests()
	if len(log) != maxLog || log[0].Status != 5 || log[maxLog-1].Status != maxLog+4 {
		t.Errorf("%d records from %d to %d", len(log), log[0].Status, log[len(log)-1].Status)
	}
}
