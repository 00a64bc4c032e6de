package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hubproxy/hubproxy/internal/bytesize"
)

// Progress display for pull. On a terminal one line is redrawn in place:
//
//	[=========>              ] 1.2 GiB / 3.4 GiB  210.0 MiB/s  ETA 10s  model-00001-of-00002.safetensors +1
//
// naming the largest file in flight (the one the wait is for; "+1": one
// more in flight), not merely the last one started. Anywhere else (a log,
// CI) it prints a line per finished file, saying whether the server had it
// (hit) or fetched it, and, every plainEvery, an "x of y" line, so the
// output stays readable.

// The progress modes of --progress.
const (
	progressAuto  = "auto"  // bar on a terminal, plain otherwise
	progressBar   = "bar"   // always the redrawn line
	progressPlain = "plain" // always plain lines
	progressNone  = "none"  // only the summary
)

const (
	barWidth   = 24
	barEvery   = 200 * time.Millisecond
	plainEvery = 5 * time.Second
	maxNameLen = 48
)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// progress tracks the bytes of a multi-file download.
type progress struct {
	w     io.Writer
	mode  string // progressBar, progressPlain or progressNone
	total int64
	now   func() time.Time
	start time.Time
	every time.Duration // how often run redraws (bar) or prints (plain)

	done atomic.Int64 // bytes received so far

	mu       sync.Mutex
	inFlight map[string]int64 // path → size of the files being downloaded
	finished int              // files done
	lastT    time.Time        // the previous rate sample
	lastB    int64
	rate     float64 // bytes/s, smoothed; 0 until measured
	drawn    int     // width of the last bar line, to blank what is left of it
	ended    bool    // finish ran
}

func newProgress(w io.Writer, mode string, total int64) *progress {
	if mode == progressAuto || mode == "" {
		mode = progressPlain
		if isTerminal(w) {
			mode = progressBar
		}
	}
	every := plainEvery
	if mode == progressBar {
		every = barEvery
	}
	now := time.Now()
	return &progress{w: w, mode: mode, total: total, now: time.Now, start: now, lastT: now, every: every, inFlight: map[string]int64{}}
}

// Write counts bytes, so a download can be io.Copy'd through the progress.
func (p *progress) Write(b []byte) (int, error) {
	p.done.Add(int64(len(b)))
	return len(b), nil
}

// add counts n more bytes done, for progress reported rather than copied.
func (p *progress) add(n int64) { p.done.Add(n) }

// startFile adds a file to those in flight, which the bar names.
func (p *progress) startFile(name string, size int64) {
	p.mu.Lock()
	p.inFlight[name] = size
	p.mu.Unlock()
}

// abandonFile takes a failed file out of those in flight.
func (p *progress) abandonFile(name string) {
	p.mu.Lock()
	delete(p.inFlight, name)
	p.mu.Unlock()
}

// finishFile takes a completed file out of those in flight and, in plain
// mode, reports it on its own line: a hit if the server had all of it
// (came is the server's cacheHeader), fetched if it went upstream.
func (p *progress) finishFile(name string, size int64, came string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inFlight, name)
	p.finished++
	if p.mode != progressPlain {
		return
	}
	verb := "fetched"
	switch came {
	case cameHit:
		verb = "hit"
	case camePartial:
		verb = "fetched the rest of"
	case cameUnknown:
		verb = "downloaded" // a server that does not say whether it had it
	}
	fmt.Fprintf(p.w, "%s %s (%s)\n", verb, name, bytesize.Human(size))
}

// currentLocked is what the bar names: the largest file in flight, and how
// many more are; with none in flight, how many are done.
func (p *progress) currentLocked() string {
	if len(p.inFlight) == 0 {
		return plural(p.finished, "file")
	}
	var name string
	var size int64 = -1
	for n, sz := range p.inFlight {
		if sz > size || sz == size && n < name {
			name, size = n, sz
		}
	}
	if len(name) > maxNameLen {
		name = "…" + name[len(name)-maxNameLen+1:]
	}
	if more := len(p.inFlight) - 1; more > 0 {
		name += " +" + strconv.Itoa(more)
	}
	return name
}

// run redraws the bar, or prints a plain progress line, until ctx ends.
func (p *progress) run(ctx context.Context) {
	if p.mode == progressNone {
		return
	}
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.tick()
		}
	}
}

func (p *progress) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	now := p.now()
	p.sampleLocked(now)
	if p.mode == progressBar {
		p.drawLocked(p.barLocked())
	} else {
		fmt.Fprintln(p.w, p.lineLocked())
	}
}

// sampleLocked folds the bytes since the last sample into the rate.
func (p *progress) sampleLocked(now time.Time) {
	dt := now.Sub(p.lastT).Seconds()
	if dt <= 0 {
		return
	}
	b := p.done.Load()
	inst := float64(b-p.lastB) / dt
	if p.rate == 0 {
		p.rate = inst
	} else {
		p.rate = 0.7*p.rate + 0.3*inst
	}
	p.lastT, p.lastB = now, b
}

// eta is the time left at the current rate, "--" while unknown.
func (p *progress) etaLocked() string {
	left := p.total - p.done.Load()
	if left <= 0 {
		return "0s"
	}
	if p.rate < 1 {
		return "--"
	}
	return (time.Duration(float64(left) / p.rate * float64(time.Second))).Round(time.Second).String()
}

// barLocked renders the terminal line (without the leading \r).
func (p *progress) barLocked() string {
	done := p.done.Load()
	fill := barWidth
	if p.total > 0 {
		fill = int(min(done, p.total) * barWidth / p.total)
	}
	bar := strings.Repeat("=", fill)
	if fill < barWidth {
		bar += ">" + strings.Repeat(" ", barWidth-fill-1)
	}
	return fmt.Sprintf("[%s] %s / %s  %s/s  ETA %s  %s", bar, bytesize.Human(done), bytesize.Human(p.total),
		bytesize.Human(int64(p.rate)), p.etaLocked(), p.currentLocked())
}

// drawLocked redraws the bar line in place, blanking leftovers of a longer
// previous line.
func (p *progress) drawLocked(line string) {
	width := utf8.RuneCountInString(line)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", max(0, p.drawn-width)))
	p.drawn = width
}

// lineLocked is the plain periodic line.
func (p *progress) lineLocked() string {
	done := p.done.Load()
	pct := 100.0
	if p.total > 0 {
		pct = float64(done) * 100 / float64(p.total)
	}
	return fmt.Sprintf("progress: %s of %s (%.0f%%), %s/s, ETA %s", bytesize.Human(done), bytesize.Human(p.total), pct, bytesize.Human(int64(p.rate)), p.etaLocked())
}

// finish draws the final state and ends the bar's line. Further ticks are
// ignored.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	now := p.now()
	elapsed := now.Sub(p.start)
	if s := elapsed.Seconds(); s > 0 {
		p.rate = float64(p.done.Load()) / s // the average, for the summary
	}
	switch p.mode {
	case progressBar:
		p.drawLocked(p.barLocked())
		fmt.Fprintln(p.w)
	case progressPlain:
		fmt.Fprintln(p.w, p.lineLocked())
	}
}
