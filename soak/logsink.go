package soak

import (
	"bufio"
	"encoding/json"
	"fmt"
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
	// A failed fill's: the range it asked for ("[a,b)") and how far it got.
	Range string `json:"range"`
	At    any    `json:"at"`
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
	// The byte ledger's view of the same: when each life of a blob in the
	// cache ended (an eviction or a failed promotion), and the bytes each
	// fill that failed for want of space had not written.
	livesAt     map[string][]time.Time
	noSpaceLeft map[string][][2]int64
	errors      int         // ERROR lines
	foreign     int         // lines that are not JSON: a panic or a runtime error
	store       storeEvents // the shared store's, as this proxy logged them (storelog.go)
}

const ringLines = 400

func newLogSink(path string) (*logSink, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &logSink{f: f, w: bufio.NewWriterSize(f, 64<<10),
		evictions: map[string]int{}, discards: map[string]int{}, mismatch: map[string]int{}, noSpace: map[string]int{},
		livesAt: map[string][]time.Time{}, noSpaceLeft: map[string][][2]int64{}, store: newStoreEvents()}, nil
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
		s.livesAt[e.ETag] = append(s.livesAt[e.ETag], time.Now())
	case strings.HasPrefix(e.Msg, "cache: promotion failed"):
		s.discards[e.ETag]++
		s.livesAt[e.ETag] = append(s.livesAt[e.ETag], time.Now())
		if strings.Contains(e.Err, "content hashes to") {
			s.mismatch[e.ETag]++
		}
	case e.Msg == "cache: fill failed" && strings.Contains(e.Err, "no space left"):
		s.noSpace[e.ETag]++
		s.noSpaceLeft[e.ETag] = append(s.noSpaceLeft[e.ETag], unwritten(e))
	case store:
		s.store.note(e, time.Now())
	}
	return e
}

// unwritten is the bytes a fill that failed had not written: from where it
// got to (its "at", rounded down to a block) to the end of its range; the
// whole range if the line does not say, and nothing if it names none.
func unwritten(e logEntry) [2]int64 {
	var a, b int64
	if _, err := fmt.Sscanf(e.Range, "[%d,%d)", &a, &b); err != nil {
		return [2]int64{}
	}
	if at, ok := e.At.(float64); ok && int64(at) > a && int64(at) <= b {
		a = int64(at) / ledgerBlock * ledgerBlock
	}
	return [2]int64{a, b}
}

// addTo adds the proxy's cache events to the byte ledger's book: the bytes
// fills that failed for space did not write, and with lives the lives of
// blobs in the cache that ended.
func (s *logSink) addTo(bk *book, w *world, lives bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for etag, ts := range s.livesAt {
		if !lives {
			break
		}
		if b := w.blob(etag); b != nil {
			bk.lives[etag] = append(bk.lives[etag], ts...)
			bk.counts[termLives][b.key] += int64(len(ts))
		}
	}
	for etag, spans := range s.noSpaceLeft {
		if b := w.blob(etag); b != nil {
			for _, sp := range spans {
				bk.span(termNoSpace, etag, sp[0], sp[1])
			}
			bk.counts[termNoSpace][b.key] += int64(len(spans))
		}
	}
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
