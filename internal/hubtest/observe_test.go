package hubtest

import (
	"sync"
	"testing"
	"time"
)

func TestRequestObserverSeesEveryRecord(t *testing.T) {
	h := NewT(t, Options{})
	addFixture(t, h)
	var (
		mu   sync.Mutex
		seen []RequestRecord
	)
	h.SetRequestObserver(func(r RequestRecord) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
	})
	url := cdnURL(t, h, "model.safetensors")
	do(t, "GET", url, "Range: bytes=0-99")
	// A record is made once the handler returns, which can be just after
	// the client has read the body.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
	}
	h.SetRequestObserver(nil)
	do(t, "GET", url, "Range: bytes=0-9") // not observed
	for deadline := time.Now().Add(5 * time.Second); len(h.Requests()) < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("observed %d records, want the resolve and the ranged GET: %+v", len(seen), seen)
	}
	if r := seen[1]; r.Range != "bytes=0-99" || r.Status != 206 || r.Bytes != 100 {
		t.Errorf("ranged GET observed as %+v", r)
	}
	if log := h.Requests(); len(log) != 3 || log[1] != seen[1] {
		t.Errorf("the observer and the log disagree: %+v vs %+v", seen, log)
	}
}

func TestFaultCountsByPath(t *testing.T) {
	h := NewT(t, Options{})
	addFixture(t, h)
	url := cdnURL(t, h, "model.safetensors")
	h.SetFaults(Faults{WrongContentRange: Fault{N: 2, Target: TargetCDN}, Status5xx: Fault{N: 1, Target: TargetAPI}})
	do(t, "GET", url, "Range: bytes=0-99")
	do(t, "GET", url, "Range: bytes=10-19")
	do(t, "GET", h.URL+"/api/models/acme/model")

	got := h.FaultCountsByPath()
	if n := got["WrongContentRange"]["acme/model/model.safetensors"]; n != 2 || len(got["WrongContentRange"]) != 1 {
		t.Errorf("WrongContentRange by path = %v", got["WrongContentRange"])
	}
	if n := got["Status5xx"][""]; n != 1 {
		t.Errorf("Status5xx by path = %v (a fault before routing has no file)", got["Status5xx"])
	}
	h.ResetCounters()
	if got := h.FaultCountsByPath(); len(got) != 0 {
		t.Errorf("after ResetCounters: %v", got)
	}
}
