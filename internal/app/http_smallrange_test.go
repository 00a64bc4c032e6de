package app_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// Small ranges of a warm blob take a short path (one pread, one write)
// instead of http.ServeContent; it must answer exactly as ServeContent
// does, and leave requests with preconditions to ServeContent.
func TestSmallWarmRangesAnswerAsServeContent(t *testing.T) {
	e := newEnv(t, hubtest.Options{}, nil)
	data := hubtest.RandomBytes(7, 3<<20)
	e.Hub.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: model.ID(), Files: []hubtest.File{{Path: "w.safetensors", Data: data}}})
	const path = "/org/model/resolve/main/w.safetensors"
	if resp, body := e.Do(http.MethodGet, path); resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("warming GET: %d, equal %v", resp.StatusCode, bytes.Equal(body, data))
	}
	size := int64(len(data))
	sum := sha256.Sum256(data)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`
	e.Hub.ResetCounters()
	for _, c := range []struct {
		header     string
		start, end int64 // inclusive
	}{
		{"bytes=0-0", 0, 0},
		{"bytes=100-4195", 100, 4195},
		{"bytes=-10", size - 10, size - 1},
		{fmt.Sprintf("bytes=%d-", size-5), size - 5, size - 1},
		{fmt.Sprintf("bytes=%d-%d", size-3, size+100), size - 3, size - 1},
		{"bytes=1048576-1179647", 1 << 20, 1<<20 + 128<<10 - 1}, // exactly 128 KiB: sendfile's path
	} {
		resp, body := e.Do(http.MethodGet, path, "Range", c.header)
		want := data[c.start : c.end+1]
		if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, want) {
			t.Errorf("%s: %d, %d bytes, equal %v", c.header, resp.StatusCode, len(body), bytes.Equal(body, want))
			continue
		}
		for k, v := range map[string]string{
			"Content-Range":  fmt.Sprintf("bytes %d-%d/%d", c.start, c.end, size),
			"Content-Length": strconv.Itoa(len(want)),
			"ETag":           etag,
			"Accept-Ranges":  "bytes",
			"X-Linked-Size":  strconv.FormatInt(size, 10),
		} {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s: %s %q, want %q", c.header, k, got, v)
			}
		}
	}
	// Preconditions go through ServeContent.
	if resp, body := e.Do(http.MethodGet, path, "Range", "bytes=0-9", "If-Range", `"other"`); resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Errorf("If-Range with another ETag: %d, %d bytes, want the whole file", resp.StatusCode, len(body))
	}
	if resp, body := e.Do(http.MethodGet, path, "Range", "bytes=0-9", "If-Range", etag); resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, data[:10]) {
		t.Errorf("If-Range with its ETag: %d, %d bytes", resp.StatusCode, len(body))
	}
	if resp, _ := e.Do(http.MethodGet, path, "Range", "bytes=0-9", "If-Match", `"other"`); resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("If-Match with another ETag: %d, want 412", resp.StatusCode)
	}
	// If-None-Match comes before Range (RFC 9110 §13.2.2), as for larger
	// ranges and whole files.
	if resp, body := e.Do(http.MethodGet, path, "Range", "bytes=0-9", "If-None-Match", etag); resp.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Errorf("If-None-Match with its ETag: %d, %d bytes, want 304", resp.StatusCode, len(body))
	}
	if resp, body := e.Do(http.MethodGet, path, "Range", "bytes=0-9", "If-None-Match", `"other"`); resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, data[:10]) {
		t.Errorf("If-None-Match with another ETag: %d, %d bytes", resp.StatusCode, len(body))
	}
	if c := e.Hub.Counters(); c.BodyBytes != 0 {
		t.Errorf("warm ranges cost %d upstream bytes", c.BodyBytes)
	}
}
