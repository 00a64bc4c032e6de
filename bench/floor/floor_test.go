package floor

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestServesRangesWithTheGivenHeaders(t *testing.T) {
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, http.Header{"Etag": {`"abc"`}, "X-Repo-Commit": {"c0ffee"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s)
	defer srv.Close()

	for _, c := range []struct {
		rng        string
		start, end int
		status     int
	}{
		{"bytes=0-4095", 0, 4096, http.StatusPartialContent},
		{"bytes=1000-1000", 1000, 1001, http.StatusPartialContent},
		{"bytes=500000-1048575", 500000, 1 << 20, http.StatusPartialContent}, // sendfile
		{"bytes=1048000-2000000", 1048000, 1 << 20, http.StatusPartialContent},
		{"bytes=1048576-1048580", 0, 0, http.StatusRequestedRangeNotSatisfiable},
		{"bytes=-5", 0, 0, http.StatusRequestedRangeNotSatisfiable},
		{"", 0, 0, http.StatusRequestedRangeNotSatisfiable},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
		if c.rng != "" {
			req.Header.Set("Range", c.rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != c.status {
			t.Errorf("%q: status %d, want %d", c.rng, resp.StatusCode, c.status)
			continue
		}
		if c.status != http.StatusPartialContent {
			continue
		}
		if !bytes.Equal(body, data[c.start:c.end]) {
			t.Errorf("%q: wrong bytes (%d of them)", c.rng, len(body))
		}
		if resp.Header.Get("Etag") != `"abc"` || resp.Header.Get("X-Repo-Commit") != "c0ffee" {
			t.Errorf("%q: headers not replayed: %v", c.rng, resp.Header)
		}
	}
}
