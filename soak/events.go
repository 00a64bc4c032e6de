package soak

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// event is one thing that happened in a run: chaos, a proxy's life, a
// violation.
type event struct {
	at   time.Duration // since the run started
	kind string
	text string
}

func (e event) String() string { return fmt.Sprintf("%9.3fs %-9s %s", e.at.Seconds(), e.kind, e.text) }

// eventLog keeps the run's events (the last maxEvents of them) for the
// failure report: what led to a violation.
type eventLog struct {
	start time.Time
	mu    sync.Mutex
	all   []event
}

const maxEvents = 20000

func newEventLog(start time.Time) *eventLog { return &eventLog{start: start} }

func (l *eventLog) add(kind, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.all) >= maxEvents {
		l.all = l.all[len(l.all)-maxEvents/2:]
	}
	l.all = append(l.all, event{at: time.Since(l.start), kind: kind, text: text})
}

// before returns the events in the window before t, oldest first, leaving
// out those that concern another proxy.
func (l *eventLog) before(t time.Time, window time.Duration, proxy string) []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	from, to := t.Sub(l.start)-window, t.Sub(l.start)+time.Millisecond
	var out []event
	for _, e := range l.all {
		if e.at < from || e.at > to {
			continue
		}
		if proxy != "" && strings.Contains(e.text, "proxy ") && !mentions(e.text, proxy) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// mentions reports whether text is about proxy ("proxy 1" or "p1") or
// every proxy.
func mentions(text, proxy string) bool {
	n := strings.TrimPrefix(proxy, "p")
	return strings.Contains(text, "proxy "+n+" ") || strings.Contains(text, "proxy "+n+"'") ||
		strings.Contains(text, proxy+" ") || strings.Contains(text, "every")
}
