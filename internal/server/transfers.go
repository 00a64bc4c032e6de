package server

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Transfer is a response in flight, as the root page lists it.
type Transfer struct {
	ID     string `json:"id"` // X-Request-Id
	Method string `json:"method"`
	Path   string `json:"path"` // escaped, without the query
	// Caller is "token" when the request carried a credential, else
	// "anonymous"; never the credential or anything derived from it.
	Caller         string  `json:"caller"`
	Bytes          int64   `json:"bytes"` // body bytes written so far
	Seconds        float64 `json:"seconds"`
	BytesPerSecond float64 `json:"bytes_per_second"`
}

// transfers is the registry of responses in flight. accessLog adds each
// file and tensor request it wraps and removes it when the handler
// returns; the byte count is the response writer's own, read atomically.
type transfers struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]*liveTransfer
}

type liveTransfer struct {
	id, method, path, caller string
	start                    time.Time
	bytes                    *atomic.Int64
}

// add registers t until remove is called with the key it returns.
func (ts *transfers) add(t *liveTransfer) uint64 {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[uint64]*liveTransfer{}
	}
	k := ts.next
	ts.next++
	ts.m[k] = t
	return k
}

func (ts *transfers) remove(k uint64) {
	ts.mu.Lock()
	delete(ts.m, k)
	ts.mu.Unlock()
}

// list is every transfer in flight at now, oldest first.
func (ts *transfers) list(now time.Time) []Transfer {
	ts.mu.Lock()
	live := make([]*liveTransfer, 0, len(ts.m))
	for _, t := range ts.m {
		live = append(live, t)
	}
	ts.mu.Unlock()
	slices.SortFunc(live, func(a, b *liveTransfer) int { return a.start.Compare(b.start) })
	out := make([]Transfer, 0, len(live))
	for _, t := range live {
		secs := max(now.Sub(t.start).Seconds(), 0)
		tr := Transfer{ID: t.id, Method: t.method, Path: t.path, Caller: t.caller,
			Bytes: t.bytes.Load(), Seconds: float64(int64(secs*1e3)) / 1e3}
		if secs > 0 {
			tr.BytesPerSecond = float64(int64(float64(tr.Bytes) / secs))
		}
		out = append(out, tr)
	}
	return out
}
