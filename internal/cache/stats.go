package cache

import "sync/atomic"

// Stats is a snapshot of the store's contents and counters. Its JSON form
// is the admin API's /cache/stats.
type Stats struct {
	Blobs          int   `json:"blobs"`           // complete, verified files
	BlobBytes      int64 `json:"blob_bytes"`      // their total size
	Partials       int   `json:"partials"`        // files being filled
	PartialBytes   int64 `json:"partial_bytes"`   // bytes present in partial files
	MaxBytes       int64 `json:"max_bytes"`       // the budget (Options.MaxBytes); 0 = unlimited
	MinFreeBytes   int64 `json:"min_free_bytes"`  // the free-space floor (Options.MinFreeBytes)
	FreeBytes      int64 `json:"free_bytes"`      // free on the cache's filesystem now; -1 if unknown
	InUse          int   `json:"in_use"`          // items with open handles, fills or promotions
	Evictions      int64 `json:"evictions"`       // items evicted for space since Open
	FillRequests   int64 `json:"fill_requests"`   // upstream requests made by fills
	FillBytes      int64 `json:"fill_bytes"`      // bytes those requests asked for
	FillErrors     int64 `json:"fill_errors"`     // fills that ended early with an error
	Promotions     int64 `json:"promotions"`      // partials verified and promoted to blobs
	VerifyFailures int64 `json:"verify_failures"` // partials whose hash did not match their etag
	FillsInFlight  int   `json:"fills_in_flight"` // upstream requests running now
	Waiters        int64 `json:"waiters"`         // readers waiting for bytes now
}

// counters are the monotonic parts of Stats.
type counters struct {
	evictions, fillRequests, fillBytes, fillErrors, promotions, verifyFailures atomic.Int64
}

// Stats reports the store's contents and counters.
func (s *Store) Stats() Stats {
	st := Stats{
		Evictions:      s.stats.evictions.Load(),
		FillRequests:   s.stats.fillRequests.Load(),
		FillBytes:      s.stats.fillBytes.Load(),
		FillErrors:     s.stats.fillErrors.Load(),
		Promotions:     s.stats.promotions.Load(),
		VerifyFailures: s.stats.verifyFailures.Load(),
		FillsInFlight:  len(s.sem),
		Waiters:        s.waiters.Load(),
		MaxBytes:       s.opts.MaxBytes,
		MinFreeBytes:   s.opts.MinFreeBytes,
		FreeBytes:      -1,
	}
	if free, err := freeBytes(s.paths.root); err == nil {
		st.FreeBytes = free
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range s.items {
		if it.complete.Load() {
			st.Blobs++
			st.BlobBytes += it.size
		} else {
			st.Partials++
			st.PartialBytes += it.bytes.Load()
		}
		if it.refs.Load() > 0 {
			st.InUse++
		}
	}
	return st
}
