package server

import (
	"sync"
	"time"
)

// logBudget limits how many successful request lines are logged per second.
// At a few requests a second every request is logged; at tens of thousands
// (a warm cache serving small ranges) logging each would cost more than
// serving it, so the excess is counted instead, and the count logged once
// the rate falls or every summaryEvery. Errors are always logged.
type logBudget struct {
	rate float64 // lines per second; 0 means unlimited
	now  func() time.Time

	mu      sync.Mutex
	tokens  float64   // guarded by mu
	last    time.Time // guarded by mu
	skipped int64     // successful lines not logged since the last summary; guarded by mu
	summary time.Time // when the last summary was due; guarded by mu
}

const summaryEvery = 10 * time.Second

func newLogBudget(rate float64, now func() time.Time) *logBudget {
	return &logBudget{rate: rate, now: now, tokens: rate, last: now(), summary: now()}
}

// take reports whether a successful request line may be logged now, and,
// when lines were skipped and a summary is due, how many.
func (b *logBudget) take() (ok bool, skipped int64) {
	if b == nil || b.rate <= 0 {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.tokens = min(b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.skipped > 0 && now.Sub(b.summary) >= summaryEvery {
		skipped, b.skipped, b.summary = b.skipped, 0, now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, skipped
	}
	b.skipped++
	return false, skipped
}
