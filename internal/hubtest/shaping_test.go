package hubtest

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	const rate = 100_000 // burst 2000 bytes
	near := func(d, want time.Duration) bool { return d >= want-time.Microsecond && d <= want+time.Microsecond }
	var b bucket
	t0 := time.Unix(1000, 0)
	if d := b.reserve(2000, rate, t0); d != 0 {
		t.Errorf("the first burst waited %v", d)
	}
	if d := b.reserve(1000, rate, t0); !near(d, 10*time.Millisecond) {
		t.Errorf("1000 bytes over the burst wait %v, want 10ms", d)
	}
	// After paying the debt and 5ms more, 500 bytes are free again.
	if d := b.reserve(500, rate, t0.Add(15*time.Millisecond)); d != 0 {
		t.Errorf("refilled bucket waited %v", d)
	}
	// A long idle spell refills only up to the burst.
	if d := b.reserve(3000, rate, t0.Add(time.Hour)); !near(d, 10*time.Millisecond) {
		t.Errorf("after idling, 3000 bytes wait %v, want 10ms", d)
	}
}

func TestBandwidthCap(t *testing.T) {
	h := NewT(t, Options{BandwidthPerConn: 8 << 20})
	f := addFixture(t, h)
	start := time.Now()
	_, body := do(t, "GET", h.URL+"/acme/model/raw/main/big.dat")
	elapsed := time.Since(start)
	if !bytes.Equal(body, f.big) {
		t.Fatal("shaped body differs")
	}
	// 1 MiB at 8 MiB/s cannot arrive faster than the bucket allows.
	if min := time.Duration(float64(len(f.big)-int(burst(8<<20))) / float64(8<<20) * float64(time.Second)); elapsed < min {
		t.Errorf("1 MiB arrived in %v, the cap allows no less than %v", elapsed, min)
	}
	h.SetFaults(Faults{}) // lifts the cap
	if _, body := do(t, "GET", h.URL+"/acme/model/raw/main/big.dat"); !bytes.Equal(body, f.big) {
		t.Fatal("body differs")
	}
}

func TestLatencySetting(t *testing.T) {
	h := NewT(t, Options{})
	addFixture(t, h)
	h.SetFaults(Faults{Latency: time.Hour})
	if got := h.Faults().Latency; got != time.Hour {
		t.Errorf("Faults().Latency = %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.URL+"/api/models/acme/model", nil)
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a request under an hour of latency was answered")
	}
	h.SetFaults(Faults{})
	resp, _ := do(t, "GET", h.URL+"/api/models/acme/model")
	wantStatus(t, resp, 200)
}
