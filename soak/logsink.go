package soak

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"time"
)

// logEntry is the part of a hubproxy JSON log line the soak reads.
type logEntry struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	Addr  string `json:"addr"`
	Repo  string `json:"repo"`
	ETag  string `json:"etag"`
	Key   string `json:"key"`
	Err   string `json:"err"`
}

// logSink keeps one proxy's log, across incarnations: the whole of it in a
// file, the last lines in memory for a failure report, and the cache events
// the byte ledger needs, counted per blob.
type logSink struct {
	mu   sync.Mutex // guards everything below
	f    *os.File
	w    *bufio.Writer
	ring []string
	next int

	evictions map[string]int // etag → evictions ("cache: evicted")
	discards  map[string]int // etag → failed promotions (the partial is deleted)
	mismatch  map[string]int // etag → of those, content that did not hash to its name
	noSpace   map[string]int // etag → fills that failed for want of disk space
	errors    int            // ERROR lines
	foreign   int            // lines that are not JSON: a panic or a runtime error
	store     storeEvents    // the shared store's, as this proxy logged them (storelog.go)
}

const ringLines = 400

func newLogSink(path string) (*logSink, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &logSink{f: f, w: bufio.NewWriterSize(f, 64<<10),
		evictions: map[string]int{}, discards: map[string]int{}, mismatch: map[string]int{}, noSpace: map[string]int{},
		store: newStoreEvents()}, nil
}

// write records a line of the driver's own.
func (s *logSink) write(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep(line)
}

func (s *logSink) keep(line string) {
	_, _ = s.w.WriteString(line)
	_ = s.w.WriteByte('\n')
	if len(s.ring) < ringLines {
		s.ring = append(s.ring, line)
	} else {
		s.ring[s.next] = line
		s.next = (s.next + 1) % ringLines
	}
}

// line records one line of hubproxy's output and returns what it parsed
// of it (only the lines the soak acts on are parsed).
func (s *logSink) line(line string) logEntry {
	var e logEntry
	store := strings.Contains(line, `"msg":"shared store`)
	interesting := store || strings.Contains(line, `"msg":"cache: `) || strings.Contains(line, " serving\"") ||
		strings.Contains(line, "admin API disabled") || strings.Contains(line, `"level":"ERROR"`)
	if interesting {
		_ = json.Unmarshal([]byte(line), &e)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep(line)
	if !strings.HasPrefix(line, "{") {
		s.foreign++
	}
	if e.Level == "ERROR" {
		s.errors++
	}
	switch {
	case e.Msg == "cache: evicted":
		s.evictions[e.ETag]++
	case strings.HasPrefix(e.Msg, "cache: promotion failed"):
		s.discards[e.ETag]++
		if strings.Contains(e.Err, "content hashes to") {
			s.mismatch[e.ETag]++
		}
	case e.Msg == "cache: fill failed" && strings.Contains(e.Err, "no space left"):
		s.noSpace[e.ETag]++
	case store:
		s.store.note(e, time.Now())
	}
	return e
}

// mismatches returns how often each blob's assembled content failed its hash.
func (s *logSink) mismatches() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.mismatch))
	for k, v := range s.mismatch {
		out[k] = v
	}
	return out
}

// tail returns the last n lines kept.
func (s *logSink) tail(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := append(append([]string(nil), s.ring[s.next:]...), s.ring[:s.next]...)
	return all[max(0, len(all)-n):]
}

// counts returns copies of the per-blob counts.
func (s *logSink) counts() (evictions, discards, noSpace map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := func(m map[string]int) map[string]int {
		out := make(map[string]int, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	return cp(s.evictions), cp(s.discards), cp(s.noSpace)
}

func (s *logSink) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.w.Flush()
	return s.f.Close()
}
