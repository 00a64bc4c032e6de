package harness

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/header"
)

// serveBytes is a range-capable origin for data.
func serveBytes(t *testing.T, data []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "f", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestUniformSafetensors checks the generated file with the project's own
// header parser, and the client's header reader against it.
func TestUniformSafetensors(t *testing.T) {
	const count, tlen = 5, 4096
	data, names := uniformSafetensors(7, count, tlen)
	h, err := header.Parse(bytes.NewReader(data), int64(len(data)), header.Options{})
	if err != nil {
		t.Fatalf("the generated file does not parse: %v", err)
	}
	if len(h.Tensors) != count || len(names) != count {
		t.Fatalf("%d tensors parsed, %d names; want %d", len(h.Tensors), len(names), count)
	}
	hlen := int64(binary.LittleEndian.Uint64(data))
	if hlen%8 != 0 || int64(len(data)) != 8+hlen+count*tlen {
		t.Fatalf("header length %d, file %d bytes", hlen, len(data))
	}
	again, _ := uniformSafetensors(7, count, tlen)
	other, _ := uniformSafetensors(8, count, tlen)
	if !bytes.Equal(data, again) || bytes.Equal(data, other) {
		t.Error("the data is not a deterministic function of the seed")
	}

	srv := serveBytes(t, data)
	spans, err := readHeader(context.Background(), srv.Client(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		tn, ok := h.Lookup(name)
		off, n := h.FileRange(tn)
		if s := spans[name]; !ok || s.off != int64(off) || s.n != int64(n) {
			t.Errorf("%s: client span %+v, parser says %d+%d", name, s, off, n)
		}
	}
	if err := tensorByHeader(context.Background(), srv.Client(), srv.URL, names[2]); err != nil {
		t.Errorf("tensorByHeader: %v", err)
	}
	if err := tensorByHeader(context.Background(), srv.Client(), srv.URL, "nope"); err == nil {
		t.Error("tensorByHeader found a tensor that does not exist")
	}
}
