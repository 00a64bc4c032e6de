package cache

import "sync/atomic"

// Stats is a snapshot of the store's contents and counters.
type Stats struct {
	Blobs          int   // complete, verified files
	BlobBytes      int64 // their total size
	Partials       int   // files being filled
	PartialBytes   int64 // bytes present in partial files
	InUse          int   // items with open handles, fills or promotions
	Evictions      int64 // items evicted for space since Open
	FillRequests   int64 // upstream requests made by fills
	FillBytes      int64 // bytes those requests asked for
	FillErrors     int64 // fills that ended early with an error
	Promotions     int64 // partials verified and promoted to blobs
	VerifyFailures int64 // partials whose hash did not match their etag
	FillsInFlight  int   // upstream requests running now
	Waiters        int64 // readers waiting for bytes now
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
