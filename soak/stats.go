package soak

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// failure is one violation with what led to it.
type failure struct {
	at      time.Time
	class   string
	text    string
	events  []event  // the run's events before it that concern its proxy
	logTail []string // the proxy's last log lines
}

// stats counts outcomes and keeps the first failures in full.
type stats struct {
	mu        sync.Mutex
	byKind    [numOps][outViolation + 1]int64
	unavail   map[string]int64 // cause → count
	classes   map[string]int64 // violation class → count
	stale     int64
	lateMax   time.Duration
	lateN     int64
	failures  []failure
	failTotal int64
}

const keepFailures = 20

func newStats() *stats { return &stats{unavail: map[string]int64{}, classes: map[string]int64{}} }

// record takes one judged response.
func (s *soak) record(r *result, j judgement) {
	st := s.stats
	st.mu.Lock()
	st.byKind[r.op.kind][j.out]++
	if j.out == outUnavailable {
		st.unavail[j.class]++
	}
	if j.stale {
		st.stale++
	}
	if j.late > 0 {
		st.lateN++
		st.lateMax = max(st.lateMax, j.late)
	}
	st.mu.Unlock()
	if j.out == outViolation {
		text := fmt.Sprintf("%s on %s: %s (status %d, sent %s, answered %s)", r.op, r.proxy, j.detail, r.status,
			r.sent.Format(clock), r.headers.Format(clock))
		s.violate(j.class, text, r.proxy, r.sent)
	}
}

// fail records a failure of the run itself (a proxy that exited on its
// own, a restart that did not serve, a post-run check).
func (s *soak) fail(class, text string) { s.violate(class, text, "", time.Now()) }

func (s *soak) violate(class, text, proxy string, at time.Time) {
	s.events.add("VIOLATION", class+": "+text)
	st := s.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	st.classes[class]++
	st.failTotal++
	if len(st.failures) >= keepFailures {
		return
	}
	f := failure{at: at, class: class, text: text, events: s.events.before(at, 30*time.Second, proxy)}
	for _, p := range s.procs.all {
		if p.name == proxy {
			f.logTail = p.sink.tail(40)
		}
	}
	st.failures = append(st.failures, f)
}

// totals sums the outcomes over every op kind.
func (s *stats) totals() (all [outViolation + 1]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.byKind {
		for o, n := range k {
			all[o] += n
		}
	}
	return all
}

func (s *stats) violations() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failTotal
}

func (s *stats) class(c string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.classes[c]
}

// table renders the outcomes per op kind.
func (s *stats) table() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "| op | served | refused | missing | unavailable | violations |\n|---|---|---|---|---|---|\n")
	for k := range numOps {
		c := s.byKind[k]
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d |\n", k, c[outServed], c[outRefused], c[outMissing], c[outUnavailable], c[outViolation])
	}
	return b.String()
}

// unavailable renders the causes of unavailability, most frequent first.
func (s *stats) unavailable() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for k, v := range s.unavail {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
	var parts []string
	for _, e := range all {
		parts = append(parts, fmt.Sprintf("%s: %d", e.k, e.v))
	}
	return strings.Join(parts, ", ")
}
